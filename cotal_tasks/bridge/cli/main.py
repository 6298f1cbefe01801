"""The ``cotal-tasks`` command line.

Exit codes (``errors``): 0 success, 1 the command failed (one line says what and what to
do), 2 a usage or configuration error, 3 an unexpected error (``--debug`` shows it).

Each subcommand's module is imported only when that subcommand runs (``LazyGroup``; the
table below names them with their one-line help): ``--help``, ``--version`` and the shell
completion of a command name import none of them; each module imports its heavy parts
(providers, databases, HTTP) inside the command, so completing its options stays light; and
an agent host that starts ``cotal-tasks mcp`` at every session start does not pay for the
bridge's providers, database libraries and HTTP stack, which only ``serve`` and the operator
commands use.
"""

from __future__ import annotations

import importlib

import click
from click.shell_completion import CompletionItem

from cotal_tasks.bridge.cli.errors import CotalGroup
from cotal_tasks.bridge.logs import LEVELS, LogFormat, LogLevel, configure

_CLI = "cotal_tasks.bridge.cli"
# name: (module, attribute, the one line of --help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": (
        "serve",
        "serve",
        "Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM.",
    ),
    "describe": (
        "calls",
        "describe",
        "Describe an endpoint over the wire: its commands, capabilities and targeting.",
    ),
    "invoke": ("calls", "invoke", "Invoke COMMAND over the wire and print the reply envelope."),
    "mcp": (
        "agent",
        "mcp",
        "Serve the seat's task tools to a coding agent over MCP (stdio by default).",
    ),
    "grants": (
        "admin",
        "grants",
        "Print the NATS permission rows (publish/subscribe allow lists) to grant.",
    ),
    "check-config": (
        "checkconfig",
        "check_config",
        "Validate a config file as serve does, and print what it configures.",
    ),
    "sync": (
        "admin",
        "sync",
        "Import (or catch up) a hosted tracker endpoint into its mirror, with progress.",
    ),
    "history": (
        "history",
        "history",
        "Print a task's append-only history: when, who, which command, status, note.",
    ),
    "conformance": (
        "conformance",
        "conformance",
        "Judge any ai.cotal.tasks endpoint against section 6 of the contract.",
    ),
    "completion": (
        "completion",
        "completion",
        "Print the shell completion script for bash, zsh or fish.",
    ),
}


class LazyGroup(CotalGroup):
    """A group whose subcommands are imported when they run, not to list them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(f"{_CLI}.{entry[0]}"), entry[1])
        assert isinstance(command, click.Command)
        return command

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """The command names from the table, importing none of them (a TAB is answered
        at the speed of ``--help``), then the group's own options."""
        names = [
            CompletionItem(name, help=entry[2])
            for name, entry in COMMANDS.items()
            if name.startswith(incomplete)
        ]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[2]) for name, entry in COMMANDS.items()])


@click.group(cls=LazyGroup)
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
