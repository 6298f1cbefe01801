"""``cotal-tasks serve``: the bridge process, until SIGINT or SIGTERM."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cotal_tasks.bridge.cli.announce import announcement
from cotal_tasks.bridge.cli.errors import EXIT_USAGE, fail
from cotal_tasks.bridge.cli.options import config_option, load, run
from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
from cotal_tasks.bridge.config import environment_problems, required_missing
from cotal_tasks.bridge.logs import configure
from cotal_tasks.bridge.wiring.lifecycle import serve_until_signalled
from cotal_tasks.bridge.wiring.process import Bridge


def _announce(bridge: Bridge, seeded: Seeded) -> None:
    for line in announcement(bridge, seeded):
        click.echo(line)


@click.command()
@config_option
@click.pass_context
def serve(ctx: click.Context, config_path: Path | None) -> None:
    """Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM."""
    config = load(config_path)
    missing = required_missing(environment_problems(config, os.environ))
    if missing:  # check-config reports the same, from the same walk
        fail(
            f"{'; '.join(missing)}. Export it before starting the bridge (the config names "
            "the variable, never the secret)",
            EXIT_USAGE,
        )
    level, fmt = ctx.meta["cotal_tasks.log"]
    configure(level or config.log.level, fmt or config.log.format, config.log.libraries)
    seeded = Seeded()
    if config_path is None and config.nats_url is None:  # the embedded default (make run)
        # It asks for the local reader: its dashboard reads on loopback with no set-up.
        http = config.http.model_copy(update={"local_reader": True})
        config = config.model_copy(update={"http": http})
        seeded = run(lambda: seed_examples(config))
    interrupted = run(
        lambda: serve_until_signalled(config, lambda bridge: _announce(bridge, seeded))
    )
    if interrupted is not None:
        click.echo(f"cotal-tasks: start-up abandoned on {interrupted}; nothing is left running")
        return
    click.echo("cotal-tasks: stopped cleanly")
