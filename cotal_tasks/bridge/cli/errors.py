"""Every failure of a CLI command as one line on stderr: ``cotal-tasks: <what>. <what to
do>``, with a documented exit status; the traceback only with ``--debug``.

Exit statuses: 0 success; 1 the command ran and failed (a contract error, an unreachable
broker or database, a tracker's refusal); 2 a usage or configuration error; 3 an
unexpected error (a bug: run again with ``--debug`` and report the traceback).
"""

from __future__ import annotations

import errno
import traceback
from pathlib import Path
from typing import Any, NoReturn

import click

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUG = 3
_PACKAGE = Path(__file__).resolve().parents[2]


def fail(message: str, status: int = EXIT_FAILED) -> NoReturn:
    """Print ``cotal-tasks: <message>`` on stderr and exit with ``status``."""
    click.echo(f"cotal-tasks: {message}", err=True)
    raise SystemExit(status)


def status_of(code: str, outcome: str | None) -> int:
    """The exit status of a contract error: what the caller gave was not usable (a name
    the endpoint does not know, ``not-found``; a malformed request, ``bad-request``) and
    nothing ran is a usage error (2), wherever it was found (the CLI, the bridge, its
    store); every other refusal is a failure of the command (1)."""
    usage = code in ("bad-request", "not-found") and outcome in (None, "not-executed")
    return EXIT_USAGE if usage else EXIT_FAILED


def tracker_refusal(
    status: int | None, message: str, credential: str | None = None, source: str | None = None
) -> str:
    """What a tracker's final answer means to the operator, and what to check: the
    variable the token came from and the repository or project, where they are known."""
    token = f"the token in {credential}" if credential else "the token"
    where = f"the endpoint's token_env, {credential}" if credential else "the endpoint's token_env"
    asked = f" {source}" if source else ""
    if status == 401:
        return (
            f"the tracker refused {token} (401: {message}). Check the token in {where} "
            "(expired, revoked, or for another host)"
        )
    if status == 403:
        return (
            f"the tracker refused {token} access to{asked or ' the issues'} (403: {message}). "
            f"Give it read and write access to the issues of{asked or ' the repository or project'}"
        )
    if status == 404:
        return (
            f"the tracker has no repository or project{asked}, or {token} cannot see it "
            f"(404: {message}). Check repository (or project) and api_url, and what {token} "
            "may see"
        )
    if status is None:
        return f"no answer from the tracker ({message}). Check api_url and the network, then retry"
    return f"the tracker answered {status} ({message}). Retry later; if it persists, check api_url"


def _own_runtime_error(exc: BaseException) -> bool:
    """A ``RuntimeError`` the project raised itself: its message names the remedy."""
    if not isinstance(exc, RuntimeError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and Path(frames[-1].filename).resolve().is_relative_to(_PACKAGE)


def explain(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit status for ``exc``, or ``None`` if it is not ours to explain."""
    from cotal_tasks.core import ContractError  # on failure only: a fast --version

    if isinstance(exc, ContractError):
        return exc.message, status_of(exc.code.value, exc.outcome)
    tracker = _tracker_error(exc)
    if tracker is not None:
        return tracker, EXIT_FAILED
    if _own_runtime_error(exc):
        return str(exc), EXIT_FAILED
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        line = (
            f"an address is already in use ({exc}). Stop the other process, or choose another port"
        )
        return line, EXIT_FAILED
    return None


def _tracker_error(exc: BaseException) -> str | None:
    # Imported only on failure: nothing of the providers is loaded for --version.
    from cotal_tasks.providers.provider import SourceRefused

    if isinstance(exc, SourceRefused):
        return tracker_refusal(exc.status, exc.message, exc.credential, exc.source)
    return None


class CotalGroup(click.Group):
    """The command group that turns every failure into one line (see the module)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except SystemExit:
            raise
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except Exception as exc:
            if ctx.meta.get("cotal_tasks.debug"):
                raise
            explained = explain(exc)
            if explained is not None:
                fail(*explained)
            fail(
                f"unexpected error: {type(exc).__name__}: {exc}. Run the command again with "
                "--debug for the traceback, and report it",
                EXIT_BUG,
            )
