"""The ``cotal-tasks`` command line.

Exit codes: 0 success, 1 a contract error (the code and message are printed), 2 a usage
or configuration error.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from cotal_tasks.bridge.cli import admin, calls
from cotal_tasks.bridge.cli import conformance as conformance_command
from cotal_tasks.bridge.cli.announce import announcement
from cotal_tasks.bridge.cli.common import config_option, load, run
from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
from cotal_tasks.bridge.wiring.lifecycle import serve_until_signalled
from cotal_tasks.bridge.wiring.process import Bridge


@click.group()
@click.version_option(package_name="cotal-tasks")
def main() -> None:
    """Serve the ai.cotal.tasks contract over a self-hosted board and hosted trackers."""


def _announce(bridge: Bridge, seeded: Seeded) -> None:
    for line in announcement(bridge, seeded):
        click.echo(line)


@main.command()
@config_option
def serve(config_path: Path | None) -> None:
    """Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM."""
    config = load(config_path)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    seeded = Seeded()
    if config_path is None and config.nats_url is None:  # the embedded default (make run)
        # It asks for the local reader: its dashboard reads on loopback with no set-up.
        http = config.http.model_copy(update={"local_reader": True})
        config = config.model_copy(update={"http": http})
        seeded = run(lambda: seed_examples(config))
    run(lambda: serve_until_signalled(config, lambda bridge: _announce(bridge, seeded)))
    click.echo("cotal-tasks: stopped cleanly")


for command in (
    calls.describe,
    calls.invoke,
    calls.mcp,
    admin.grants,
    admin.check_config,
    admin.sync,
    admin.history,
    conformance_command.conformance,
):
    main.add_command(command)
