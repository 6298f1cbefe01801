"""A small Cotal caller for the tests, built from the wire reference rather than from the
bridge's own caller: it writes subjects and envelopes itself, reads the contract from
``EPC_<space>`` by direct get, and reads replies on the caller's own reply rail. It also
plays the parts of the space the bridge reads: lifecycle heads and presence cards.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from cotal_tasks.core import Seat


def space_token(space: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in space)


def nonce() -> str:
    return secrets.token_urlsafe(18)


@dataclass
class Bound:
    instance_id: str
    epoch: int
    descriptor: dict[str, Any]
    document: dict[str, Any]

    def row(self, command: str) -> dict[str, Any]:
        return next(r for r in self.document["commands"] if r["name"] == command)


class TestCaller:
    """One caller seat; every reply it returns is the parsed reply envelope."""

    __test__ = False  # not a pytest class

    def __init__(self, nc: NATS, space: str, endpoint: str, seat: Seat) -> None:
        self.nc = nc
        self.space = space
        self.endpoint = endpoint
        self.seat = seat
        self.prefix = f"cotal.{space_token(space)}"
        self.token = endpoint.replace(".", "_")
        self.bound: Bound | None = None

    # -- subjects -------------------------------------------------------------------------
    def subject(
        self,
        command: str,
        request_nonce: str,
        *,
        mode: str | None = None,
        target_owner: str | None = None,
        route: str = "one",
        rail: str = "ep",
        generation: str | None = None,
    ) -> str:
        parts = [self.prefix, rail, route, self.token]
        if route == "inst":
            assert self.bound is not None
            parts.append(self.bound.instance_id)
        parts.append(command)
        if mode == "self":
            parts.append("self")
        elif mode is not None:
            parts += [mode, target_owner or self.seat.owner]
        parts += [self.seat.owner, self.seat.actor, self.seat.lifecycleUid]
        if generation is not None:
            parts.append(generation)
        parts.append(request_nonce)
        return ".".join(parts)

    def reply_filter(self, request_nonce: str, rail: str = "ep") -> str:
        s = self.seat
        tail = f"{s.owner}.{s.actor}.{s.lifecycleUid}"
        extra = ".*" if rail == "ep.v1" else ""
        return f"{self.prefix}.{rail}.reply.*.*.*.{tail}{extra}.{request_nonce}"

    # -- raw exchange ---------------------------------------------------------------------
    async def exchange(
        self, subject: str, data: bytes, request_nonce: str, *, rail: str = "ep", wait: float = 5
    ) -> tuple[Msg, dict[str, Any]] | None:
        """Publish raw bytes; return (reply message, reply body), or None when no reply."""
        sub = await self.nc.subscribe(self.reply_filter(request_nonce, rail))
        try:
            await self.nc.publish(subject, data)
            try:
                msg = await sub.next_msg(timeout=wait)
            except TimeoutError:
                return None
            body: dict[str, Any] = json.loads(msg.data)
            return msg, body
        finally:
            await sub.unsubscribe()

    # -- describe and contract ------------------------------------------------------------
    async def artifact(self, digest: str) -> Any:
        stream = f"EPC_{space_token(self.space)}"
        subject = f"{self.prefix}.epc.{digest.removeprefix('sha256:')}"
        msg = await self.nc.request(f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=5)
        return json.loads(msg.data)

    async def describe(self) -> Bound:
        request_nonce = nonce()
        body = self.envelope("describe", args=None, digests=False)
        got = await self.exchange(
            self.subject("describe", request_nonce), json.dumps(body).encode(), request_nonce
        )
        assert got is not None, "describe was not answered"
        msg, reply = got
        assert reply["ok"], reply
        tokens = msg.subject.split(".")
        cluster = reply["data"]["descriptor"]["clusters"][0]
        manifest = await self.artifact(cluster["digest"])
        document = await self.artifact(manifest["root"])
        self.bound = Bound(tokens[5], int(tokens[6]), reply["data"]["descriptor"], document)
        return self.bound

    # -- envelopes and calls --------------------------------------------------------------
    def envelope(
        self,
        command: str,
        *,
        args: Any = None,
        request_id: str | None = None,
        digests: bool = True,
        bind: bool = True,
        target: Seat | None = None,
        reply_expected: bool = True,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "v": 1,
            "id": request_id or secrets.token_urlsafe(9),
            "op": {"endpoint": self.endpoint, "command": command},
            "class": "ephemeral",
            "replyExpected": reply_expected,
            "deadlineMs": 10_000,
            "from": {"id": self.seat.principal, "name": "test-caller"},
        }
        if digests and self.bound is not None:
            row = self.bound.row(command)
            body["op"]["inputDigest"] = row["inputDigest"]
            body["op"]["outputDigest"] = row["outputDigest"]
        if bind and self.bound is not None and command != "describe":
            body["bind"] = {"instanceId": self.bound.instance_id, "epoch": self.bound.epoch}
        if args is not None:
            body["args"] = args
        if target is not None:
            body["target"] = {
                "owner": target.owner,
                "actor": target.actor,
                "lifecycleUid": target.lifecycleUid,
            }
        return body

    async def call(
        self,
        command: str,
        args: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        target: Seat | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """A well-formed call; returns the reply envelope."""
        if self.bound is None:
            await self.describe()
        request_nonce = nonce()
        subject = self.subject(
            command,
            request_nonce,
            mode=mode,
            target_owner=target.owner if target is not None and mode != "self" else None,
        )
        body = self.envelope(
            command,
            args=args if args is not None else {},
            request_id=request_id,
            target=target if mode not in (None, "self") else None,
        )
        got = await self.exchange(subject, json.dumps(body).encode(), request_nonce)
        assert got is not None, f"{command} was not answered"
        return got[1]

    async def ok(self, command: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
        """A call that must succeed; returns its data."""
        reply = await self.call(command, args, **kw)
        assert reply["ok"], reply
        return reply.get("data")

    async def refused(self, command: str, args: dict[str, Any] | None = None, **kw: Any) -> str:
        """A call that must fail; returns its error code."""
        reply = await self.call(command, args, **kw)
        assert not reply["ok"], reply
        assert "data" not in reply
        code: str = reply["error"]["code"]
        return code


class Space:
    """Plays the Cotal side of a space: lifecycle heads (the trusted mapping) and presence."""

    def __init__(self, js: JetStreamContext, space: str) -> None:
        self.js = js
        self.space = space
        self.token = space_token(space)

    async def activate(self, seat: Seat) -> int:
        """Write ``seat`` as the current lifecycle of its principal; return the revision."""
        kv = await self.js.key_value(f"cotal_records_{self.token}")
        head = {
            "owner": seat.owner,
            "actor": seat.actor,
            "lifecycleUid": seat.lifecycleUid,
            "managerInstance": "test-manager",
            "processEpoch": 1,
            "state": "active",
        }
        return await kv.put(f"lifecycle.{seat.owner}.{seat.actor}", json.dumps(head).encode())

    async def present(self, seat: Seat, environment: str | None = None) -> None:
        """Publish a fresh presence card for ``seat`` (optionally with an environment)."""
        kv = await self.js.key_value(f"cotal_presence_{self.token}")
        card: dict[str, Any] = {
            "card": {"id": seat.principal, "name": seat.actor, "kind": "agent"},
            "lifecycleUid": seat.lifecycleUid,
            "status": "working",
            "ts": int(time.time() * 1000),
        }
        if environment is not None:
            card["environment"] = environment
        await kv.put(seat.principal, json.dumps(card).encode())

    async def spawn(self, seat: Seat, environment: str | None = None) -> None:
        await self.activate(seat)
        await self.present(seat, environment)


async def collect(sub_queue: asyncio.Queue[Msg], wait: float) -> list[Msg]:
    """Drain what arrives on a queue within ``wait`` seconds."""
    out: list[Msg] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while (left := deadline - loop.time()) > 0:
        try:
            out.append(await asyncio.wait_for(sub_queue.get(), left))
        except TimeoutError:
            break
    return out
