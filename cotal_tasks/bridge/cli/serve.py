"""``cotal-tasks serve``: the bridge process, until SIGINT or SIGTERM.

Before it does anything it runs the checks ``check-config`` reports (``preflight``): a
mistake in the config's environment stops it at once, exit 2, one line per mistake.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from cotal_tasks.bridge.cli.errors import EXIT_USAGE
from cotal_tasks.bridge.cli.options import config_option, load, run
from cotal_tasks.bridge.logs import configure


@click.command()
@config_option
@click.pass_context
def serve(ctx: click.Context, config_path: Path | None) -> None:
    """Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM."""
    # The bridge's parts load here, when it serves, not when a shell completes an option.
    from cotal_tasks.bridge.cli.announce import announcement
    from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
    from cotal_tasks.bridge.preflight import blocking, preflight
    from cotal_tasks.bridge.wiring.lifecycle import serve_until_signalled
    from cotal_tasks.bridge.wiring.process import Bridge

    config = load(config_path)
    mistakes = blocking(preflight(config, os.environ))
    if mistakes:  # check-config reports the same, from the same walk
        for mistake in mistakes:
            click.echo(f"cotal-tasks: {mistake.message}", err=True)
        raise SystemExit(EXIT_USAGE)
    level, fmt = ctx.meta["cotal_tasks.log"]
    configure(level or config.log.level, fmt or config.log.format, config.log.libraries)
    seeded = Seeded()
    if config_path is None:  # the embedded default (make run): its first run is seeded
        seeded = run(lambda: seed_examples(config))

    async def announce(bridge: Bridge) -> None:
        for line in await announcement(bridge, seeded, config_path):
            click.echo(line)

    interrupted = run(lambda: serve_until_signalled(config, announce))
    if interrupted is not None:
        click.echo(f"cotal-tasks: start-up abandoned on {interrupted}; nothing is left running")
        return
    click.echo("cotal-tasks: stopped cleanly")
