"""The ``cotal-tasks`` command line.

Exit codes: 0 success, 1 a contract error (the code and message are printed), 2 a usage
or configuration error.

Each subcommand's module is imported when that command runs (``LazyGroup``): an agent
host starts ``cotal-tasks mcp`` at every session start, and it should not pay for the
bridge's providers, database libraries and HTTP stack, which only ``serve`` and the
operator commands use.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cotal_tasks.bridge.cli.common import config_option, load, run

if TYPE_CHECKING:
    from cotal_tasks.bridge.cli.seed import Seeded
    from cotal_tasks.bridge.wiring.process import Bridge

# command name -> module and attribute, imported when the command is asked for
_COMMANDS = {
    "describe": ("cotal_tasks.bridge.cli.calls", "describe"),
    "invoke": ("cotal_tasks.bridge.cli.calls", "invoke"),
    "mcp": ("cotal_tasks.bridge.cli.agent", "mcp"),
    "grants": ("cotal_tasks.bridge.cli.admin", "grants"),
    "check-config": ("cotal_tasks.bridge.cli.admin", "check_config"),
    "sync": ("cotal_tasks.bridge.cli.admin", "sync"),
    "history": ("cotal_tasks.bridge.cli.admin", "history"),
    "conformance": ("cotal_tasks.bridge.cli.conformance", "conformance"),
}


class LazyGroup(click.Group):
    """A group whose listed subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = _COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(where[0]), where[1])
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="cotal-tasks")
def main() -> None:
    """Serve the ai.cotal.tasks contract over a self-hosted board and hosted trackers."""


def _announce(bridge: Bridge, seeded: Seeded) -> None:
    from cotal_tasks.bridge.cli.announce import announcement

    for line in announcement(bridge, seeded):
        click.echo(line)


@main.command()
@config_option
def serve(config_path: Path | None) -> None:
    """Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM."""
    from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
    from cotal_tasks.bridge.process.lifecycle import serve_until_signalled

    config = load(config_path)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    seeded = Seeded()
    if config_path is None and config.nats_url is None:  # the embedded default (make run)
        seeded = run(lambda: seed_examples(config))
    run(lambda: serve_until_signalled(config, lambda bridge: _announce(bridge, seeded)))
    click.echo("cotal-tasks: stopped cleanly")
