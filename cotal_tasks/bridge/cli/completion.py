"""``cotal-tasks completion bash|zsh|fish``: the shell completion script, to source or to
install (``docs/operations.md`` says where)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish."""
    root = ctx.find_root().command
    complete = get_completion_class(shell)
    assert complete is not None  # every choice is one of click's own shells
    click.echo(complete(root, {}, "cotal-tasks", "_COTAL_TASKS_COMPLETE").source())
