"""``cotal-tasks completion bash|zsh|fish``: the shell completion script, to source or to
install (``docs/operations.md`` says where)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from cotal_tasks.bridge.cli.errors import EXIT_USAGE, fail

SHELLS = ("bash", "zsh", "fish")


def _shells(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    return [shell for shell in SHELLS if shell.startswith(incomplete)]


@click.command()
@click.argument("shell", shell_complete=_shells)
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish."""
    if shell not in SHELLS:
        fail(
            f"{shell!r} is not a shell the completion supports. Give bash, zsh or fish, "
            "such as: cotal-tasks completion bash",
            EXIT_USAGE,
        )
    root = ctx.find_root().command
    complete = get_completion_class(shell)
    assert complete is not None  # every choice is one of click's own shells
    click.echo(complete(root, {}, "cotal-tasks", "_COTAL_TASKS_COMPLETE").source())
