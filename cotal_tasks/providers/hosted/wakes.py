"""Waking the sync leader from any instance, over the shared PostgreSQL mirror.

Several instances can serve one hosted endpoint; only the elected leader runs its sync
loop, but a webhook may be delivered to any of them. The receiver wakes its own sync and
also sends a ``NOTIFY`` on the endpoint's wake channel (``cotal_tasks_wake_`` and a hash
of the sync key): the sync key, the sending instance's holder id and the issue numbers
(too many numbers: a "poll now" wake instead, so the payload stays small). The leader,
while it leads, ``LISTEN``\\ s on a dedicated connection and wakes its sync for the
notifications about its own sync key from the other instances; its own it ignores, as
its sync was woken already.

A lost notification loses nothing: the poll stays the source of truth. On SQLite (one
instance, which always leads) nothing is sent and nothing is listened to.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from cotal_tasks.providers.board.checkpoints import Checkpoints

log = logging.getLogger(__name__)

PREFIX = "cotal_tasks_wake_"
MAX_NUMBERS = 100  # more issues than this: one "poll now" wake
MAX_PAYLOAD = 4000  # bytes; PostgreSQL refuses a payload of 8000 or more


def process_holder() -> str:
    """A name for this process among the instances: host, pid and a nonce."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def channel(key: str) -> str:
    """The wake channel of the sync ``key`` (a valid identifier, well under 63 bytes)."""
    return PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class Wake:
    key: str  # the sync key the wake is for
    origin: str  # the holder id of the instance that received the delivery
    numbers: frozenset[int] | None  # None: poll now


def encode(key: str, origin: str, numbers: Iterable[int]) -> str:
    listed = sorted(set(numbers))
    if len(listed) <= MAX_NUMBERS:
        body = json.dumps({"key": key, "from": origin, "numbers": listed}, separators=(",", ":"))
        if len(body.encode("utf-8")) <= MAX_PAYLOAD:
            return body
    return json.dumps({"key": key, "from": origin, "numbers": None}, separators=(",", ":"))


def decode(payload: str) -> Wake | None:
    """The wake in ``payload``; ``None`` when it is not one (it is then ignored)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    key, origin, numbers = value.get("key"), value.get("from"), value.get("numbers")
    if not isinstance(key, str) or not isinstance(origin, str):
        return None
    if numbers is None:
        return Wake(key, origin, None)
    if not isinstance(numbers, list) or not all(type(n) is int for n in numbers):
        return None
    return Wake(key, origin, frozenset(numbers))


async def send(checkpoints: Checkpoints, key: str, origin: str, numbers: Iterable[int]) -> None:
    """Tell the other instances on this mirror (the leader) to wake for ``numbers``.
    Never raises: a lost wake only waits for the next poll."""
    if not checkpoints.shared:
        return
    try:
        async with checkpoints.engine.begin() as conn:
            await conn.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": channel(key), "payload": encode(key, origin, numbers)},
            )
    except (SQLAlchemyError, OSError) as exc:
        log.warning(
            "%s: could not wake the sync leader over the mirror (%s); the next poll finds "
            "the change. Check the database",
            key,
            type(exc).__name__,
        )


class Listener:
    """The leader's side: a dedicated mirror connection listening on its wake channel.

    ``ensure`` (each lease turn) listens, or listens again on a fresh connection when the
    old one broke; a failure is logged and retried on the next turn, never raised."""

    def __init__(
        self, checkpoints: Checkpoints, key: str, holder: str, wake: Callable[[Iterable[int]], None]
    ) -> None:
        self._checkpoints, self._key, self._holder = checkpoints, key, holder
        self._wake = wake  # called with the issue numbers (empty: poll now)
        self._conn: AsyncConnection | None = None
        self._driver: Any = None
        self.heard = 0  # wakes taken from other instances

    @property
    def listening(self) -> bool:
        return self._driver is not None and not self._driver.is_closed()

    def server_pid(self) -> int | None:
        """The listening connection's server process, while it listens."""
        return int(self._driver.get_server_pid()) if self.listening else None

    async def ensure(self) -> None:
        if not self._checkpoints.shared or self.listening:
            return
        if self._conn is not None:
            log.warning("%s: the wake listener's connection broke; listening again", self._key)
            await self.close()
        try:
            self._conn = await self._checkpoints.engine.connect()
            raw = await self._conn.get_raw_connection()
            driver: Any = raw.driver_connection
            if not hasattr(driver, "add_listener"):
                log.warning(
                    "%s: the database driver cannot LISTEN; webhooks delivered to other "
                    "instances wait for the next poll. Use postgresql+asyncpg",
                    self._key,
                )
                return
            await driver.add_listener(channel(self._key), self._heard)
            self._driver = driver
        except Exception as exc:  # the boundary: a broken listener never stops the sync
            log.warning(
                "%s: cannot listen for webhook wakes (%s); retrying on the next lease turn. "
                "Check the database",
                self._key,
                type(exc).__name__,
            )
            await self.close()

    def _heard(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        wake = decode(payload)
        if wake is None or wake.key != self._key or wake.origin == self._holder:
            return  # not for this endpoint, or this instance's own (its sync is woken)
        self.heard += 1
        self._wake(wake.numbers or ())

    async def close(self) -> None:
        """Stop listening: the connection is discarded, never pooled with a LISTEN on it."""
        conn, self._conn, self._driver = self._conn, None, None
        if conn is None:
            return
        try:
            await conn.invalidate()
            await conn.close()
        except Exception as exc:  # closing a broken connection: nothing left to do
            log.debug("%s: closing the wake listener: %s", self._key, type(exc).__name__)
