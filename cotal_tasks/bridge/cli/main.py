"""The ``cotal-tasks`` command line.

Exit codes (``errors``): 0 success, 1 the command failed (one line says what and what to
do), 2 a usage or configuration error, 3 an unexpected error (``--debug`` shows it).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from cotal_tasks.bridge.cli import admin, calls, checkconfig
from cotal_tasks.bridge.cli import conformance as conformance_command
from cotal_tasks.bridge.cli.announce import announcement
from cotal_tasks.bridge.cli.common import config_option, load, run
from cotal_tasks.bridge.cli.errors import EXIT_USAGE, CotalGroup, fail
from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
from cotal_tasks.bridge.config import environment_problems, required_missing
from cotal_tasks.bridge.logs import LEVELS, LogFormat, LogLevel, configure
from cotal_tasks.bridge.process.lifecycle import serve_until_signalled
from cotal_tasks.bridge.wiring.process import Bridge


@click.group(cls=CotalGroup)
@click.version_option(package_name="cotal-tasks")
@click.option("--debug", is_flag=True, help="Show the traceback of a failure.")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS),
    default=None,
    help="The project's log level (serve: default [log] level, else warning).",
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default=None, help="Log lines' format."
)
@click.pass_context
def main(
    ctx: click.Context, debug: bool, log_level: LogLevel | None, log_format: LogFormat | None
) -> None:
    """Serve the ai.cotal.tasks contract over a self-hosted board and hosted trackers."""
    ctx.meta["cotal_tasks.debug"] = debug
    ctx.meta["cotal_tasks.log"] = (log_level, log_format)
    configure(log_level or "warning", log_format or "text")


def _announce(bridge: Bridge, seeded: Seeded) -> None:
    for line in announcement(bridge, seeded):
        click.echo(line)


@main.command()
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
        seeded = run(lambda: seed_examples(config))
    interrupted = run(
        lambda: serve_until_signalled(config, lambda bridge: _announce(bridge, seeded))
    )
    if interrupted is not None:
        click.echo(f"cotal-tasks: start-up abandoned on {interrupted}; nothing is left running")
        return
    click.echo("cotal-tasks: stopped cleanly")


for command in (
    calls.describe,
    calls.invoke,
    calls.mcp,
    admin.grants,
    checkconfig.check_config,
    admin.sync,
    admin.history,
    conformance_command.conformance,
):
    main.add_command(command)
