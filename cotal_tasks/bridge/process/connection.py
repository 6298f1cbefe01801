"""The bridge's connection to its broker: connect (a cluster's nodes in turn, reconnecting
with jittered backoff), drain on close, and where a local caller finds the embedded broker.

The first connection has a deadline (``nats_connect_timeout_s``): past it, ``connect``
fails ``unavailable`` naming ``nats_url``. Once connected, a lost connection is retried
without end. A short-lived caller (the CLI) asks for ``once``: each node is tried once,
so an absent broker is answered at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.client import Server

from cotal_tasks.bridge.broker_config import BrokerConfig, server_parts
from cotal_tasks.bridge.wire.grants import bridge_inbox
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.masking import mask_credentials

log = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.25
_BACKOFF_CAP_S = 10.0


def jittered_backoff(servers: list[Server], _info: dict[str, Any]) -> tuple[Server | None, float]:
    """The next server (the one tried least, so a cluster's other nodes are tried in turn)
    and the reconnect delay: exponential in the attempts so far, capped, with jitter."""
    attempts = min((server.reconnects for server in servers), default=0)
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempts)
    least = min(servers, key=lambda server: server.reconnects, default=None)
    return least, random.uniform(ceiling / 2, ceiling)


async def connect(
    config: BrokerConfig, url: str, *, once: bool = False, inbox: str | None = None
) -> NATS:
    """Connect within ``config.nats_connect_timeout_s``; ``once`` tries each node once.

    The connection's inbox prefix is the bridge's (``bridge_inbox``, what its serve rows let
    it read) unless ``inbox`` names the caller's own: a CLI call made as a seat connects
    under that seat's prefix (``seat_inbox``), the one its own rows allow."""
    nc = NATS()
    shown = mask_credentials(url)  # for the log: never a password
    first_error: list[Exception] = []

    async def log_error(exc: Exception) -> None:
        if not nc.is_connected and not first_error:
            first_error.append(exc)  # the first connection: its deadline reports it
        if nc.is_connected or nc.is_reconnecting:
            log.warning("NATS connection: %s: %s", type(exc).__name__, mask_credentials(str(exc)))

    async def log_disconnect() -> None:
        if not (nc.is_closed or nc.is_draining):
            log.warning("NATS connection to %s lost; reconnecting with backoff", shown)

    async def log_reconnect() -> None:
        log.warning("NATS connection to %s restored", shown)

    options: dict[str, Any] = {
        "name": "cotal-tasks",
        "error_cb": log_error,
        "disconnected_cb": log_disconnect,
        "reconnected_cb": log_reconnect,
        "max_reconnect_attempts": 1 if once else -1,
        "reconnect_to_server_handler": jittered_backoff,
        "connect_timeout": min(5.0, config.nats_connect_timeout_s),
        "dont_randomize": True,  # the listed order: the nearest node first
        "inbox_prefix": inbox or bridge_inbox(config.space),
    }
    if once:
        options["reconnect_time_wait"] = 0.1
    if config.nats_credentials is not None:
        options["user_credentials"] = str(config.nats_credentials)
    if config.nats_user is not None:
        options["user"] = config.nats_user
        if config.nats_password_env is not None:
            password = os.environ.get(config.nats_password_env)
            if password is None:
                raise ContractError(
                    ErrorCode.FAILED_PRECONDITION,
                    f"nats_password_env names {config.nats_password_env}, which is not set. "
                    "Export it before starting the bridge",
                )
            options["password"] = password
    deadline = config.nats_connect_timeout_s
    try:
        await asyncio.wait_for(nc.connect(server_parts(url), **options), deadline)
    except (OSError, nats.errors.Error, TimeoutError) as exc:
        with contextlib.suppress(Exception):
            await nc.close()
        timed_out = isinstance(exc, TimeoutError)
        cause = first_error[0] if first_error else exc
        why = f"{type(cause).__name__}{', still failing after ' if timed_out else ''}"
        why += f"{deadline:g} s, nats_connect_timeout_s" if timed_out else ""
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"cannot connect to NATS at {shown} ({why}). Check nats_url, that the "
            "broker runs, and the credentials (or leave nats_url unset for the embedded broker)",
        ) from exc
    return nc


def embedded_url_file(config: BrokerConfig) -> Path:
    return config.data_dir / "nats.url"


def broker_url(config: BrokerConfig) -> str:
    """The broker a local caller should use: the configured one, or the running embedded one."""
    if config.nats_url is not None:
        return config.nats_url
    try:
        return embedded_url_file(config).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"no nats_url is configured and no embedded broker is running under "
            f"{config.data_dir}. Start the bridge first (make run), or set nats_url",
        ) from exc


async def close_connection(nc: NATS) -> None:
    """Drain, then close; a broker already gone must not turn a clean stop into an error."""
    with contextlib.suppress(Exception):
        await nc.drain()
    if not nc.is_closed:
        with contextlib.suppress(Exception):
            await nc.close()
