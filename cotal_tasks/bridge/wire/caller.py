"""A Cotal caller: describe an endpoint, resolve its contract from ``EPC_<space>``, and
invoke its commands over the wire, as Cotal's ``resolveService``/``invokeCommand`` do.

Used by ``cotal-tasks describe``/``invoke`` and by the benchmarks. Replies are read on the
caller's own reply rail and accepted only from the bound instance, echoing the request id.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.validation import args_refusal
from cotal_tasks.bridge.wire.subjects import artifact_subject, prefix, stream_names
from cotal_tasks.core import ContractError, ErrorCode, Seat, canonical_json, digest, endpoint_token

DESCRIBE_RETRY_S = 0.25


class UsageRefused(ContractError):
    """Refused by the caller itself, before anything was sent (a usage error)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.BAD_REQUEST, message, outcome="not-executed")


def nonce() -> str:
    return secrets.token_urlsafe(24)


def new_id() -> str:
    return secrets.token_urlsafe(12)


@dataclass(frozen=True, slots=True)
class ResolvedCommand:
    name: str
    capability: str
    targeted: bool
    modes: tuple[str, ...]
    input_digest: str
    output_digest: str
    args: Any  # compiled jsonschema_rs validators
    output: Any

    def targeting(self) -> str:
        if not self.targeted:
            return "untargeted"
        return (
            "targeted, "
            + ("mode " if len(self.modes) == 1 else "modes ")
            + " and ".join(self.modes)
        )


@dataclass(frozen=True, slots=True)
class Resolved:
    endpoint: str
    owner: str
    instance_id: str
    epoch: int
    cluster_digest: str
    urn: str
    revision: int
    commands: dict[str, ResolvedCommand]


class CotalCaller:
    """One caller seat talking to one endpoint."""

    def __init__(self, nc: NATS, space: str, endpoint: str, seat: Seat, name: str = "cli") -> None:
        self.nc = nc
        self.space = space
        self.endpoint = endpoint
        self.seat = seat
        self.name = name
        self._token = endpoint_token(endpoint)
        self.resolved: Resolved | None = None

    def _reply_filter(self, request_nonce: str) -> str:
        s = self.seat
        rail = f"{prefix(self.space)}.ep.reply.*.*.*"
        return f"{rail}.{s.owner}.{s.actor}.{s.lifecycleUid}.{request_nonce}"

    def request_subject(
        self, command: str, request_nonce: str, mode: str | None, target: Seat | None
    ) -> str:
        parts = [prefix(self.space), "ep", "one", self._token, command]
        if mode == "self":
            parts.append("self")
        elif mode is not None:
            if target is None:
                raise UsageRefused(
                    f"{command} at mode {mode} needs a target seat (OWNER.ACTOR/UID)"
                )
            parts += [mode, target.owner]
        s = self.seat
        parts += [s.owner, s.actor, s.lifecycleUid, request_nonce]
        return ".".join(parts)

    async def _exchange(
        self, subject: str, body: dict[str, Any], request_nonce: str, wait_s: float, repeat: bool
    ) -> Msg:
        """Publish ``body`` and wait for its reply on this caller's own reply rail."""
        sub = await self.nc.subscribe(self._reply_filter(request_nonce))
        sentinel = (
            f"{prefix(self.space)}.ep.reply._nr._nr._nr."
            f"{self.seat.owner}.{self.seat.actor}.{self.seat.lifecycleUid}.{request_nonce}"
        )
        data = json.dumps(body, separators=(",", ":")).encode()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_s
            while True:
                await self.nc.publish(subject, data, reply=sentinel)
                wait = min(DESCRIBE_RETRY_S, deadline - loop.time()) if repeat else wait_s
                try:
                    msg = await sub.next_msg(timeout=max(wait, 0.001))
                except TimeoutError:
                    if not repeat or loop.time() >= deadline:
                        raise ContractError(
                            ErrorCode.DEADLINE_EXCEEDED,
                            f"no reply from {self.endpoint} within {wait_s:g} s; is the bridge "
                            "running and serving this space?",
                            outcome="unknown",
                        ) from None
                    continue
                if msg.headers and msg.headers.get("Status") == "503":
                    if repeat and loop.time() < deadline:
                        await asyncio.sleep(min(DESCRIBE_RETRY_S, deadline - loop.time()))
                        continue  # describe keeps asking until an instance is up
                    raise ContractError(
                        ErrorCode.UNAVAILABLE,
                        f"no instance of {self.endpoint} is serving in space {self.space}; "
                        "start the bridge (cotal-tasks serve)",
                        outcome="not-executed",
                    )
                return msg
        finally:
            await sub.unsubscribe()

    def _envelope(self, command: str, request_id: str, args: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "v": 1,
            "id": request_id,
            "op": {"endpoint": self.endpoint, "command": command},
            "class": "ephemeral",
            "replyExpected": True,
            "deadlineMs": 10_000,
            "from": {"id": self.seat.principal, "name": self.name},
        }
        if args is not None:
            body["args"] = args
        return body

    async def describe(self, wait_s: float = 10.0) -> Resolved:
        """Describe the endpoint, then fetch and verify its cluster and schemas."""
        request_nonce = nonce()
        body = self._envelope("describe", new_id(), None)
        msg = await self._exchange(
            self.request_subject("describe", request_nonce, None, None),
            body,
            request_nonce,
            wait_s,
            repeat=True,
        )
        reply = json.loads(msg.data)
        if not reply.get("ok"):
            error = reply.get("error", {})
            raise ContractError(ErrorCode(error.get("code", "internal")), error.get("message", ""))
        tokens = msg.subject.split(".")
        instance_id, epoch = tokens[5], int(tokens[6])
        descriptor = reply["data"]["descriptor"]
        cluster = descriptor["clusters"][0]
        document = await self._closure(cluster["digest"])
        commands: dict[str, ResolvedCommand] = {}
        for row in document["commands"]:
            commands[row["name"]] = ResolvedCommand(
                row["name"],
                row["capability"],
                row["targeted"],
                tuple(row.get("modes", ())),
                row["inputDigest"],
                row["outputDigest"],
                jsonschema_rs.validator_for(await self._closure(row["inputDigest"])),
                jsonschema_rs.validator_for(await self._closure(row["outputDigest"])),
            )
        self.resolved = Resolved(
            descriptor["endpoint"],
            descriptor["owner"],
            instance_id,
            epoch,
            cluster["digest"],
            document["urn"],
            document["revision"],
            commands,
        )
        return self.resolved

    async def _artifact(self, digest_text: str) -> Any:
        hex_digest = digest_text.removeprefix("sha256:")
        stream = stream_names(self.space)["contracts"]
        subject = artifact_subject(self.space, hex_digest)
        msg = await self.nc.request(f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=5)
        if msg.headers and msg.headers.get("Status") in ("404", "408"):
            raise ContractError(
                ErrorCode.CONTRACT_INVALID, f"artifact {digest_text} is not in {stream}"
            )
        if digest(msg.data) != digest_text:
            raise ContractError(
                ErrorCode.CONTRACT_INVALID, f"artifact {digest_text} does not match its digest"
            )
        value = json.loads(msg.data)
        if canonical_json(value) != msg.data:
            raise ContractError(
                ErrorCode.CONTRACT_INVALID, f"artifact {digest_text} is not canonical JSON"
            )
        return value

    async def _closure(self, closure_digest: str) -> Any:
        manifest = await self._artifact(closure_digest)
        if manifest.get("v") != 1 or manifest.get("members") != []:
            raise ContractError(
                ErrorCode.CONTRACT_INVALID, f"manifest {closure_digest} is not a v1 manifest"
            )
        return await self._artifact(manifest["root"])

    async def invoke(
        self,
        command: str,
        args: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        target: Seat | None = None,
        request_id: str | None = None,
        wait_s: float = 10.0,
    ) -> dict[str, Any]:
        """Invoke ``command`` and return the reply envelope (``ok`` true or false)."""
        resolved = self.resolved or await self.describe(wait_s)
        row = resolved.commands.get(command)
        if row is None:
            raise UsageRefused(
                f"{self.endpoint} has no command {command!r}; it serves "
                + ", ".join(resolved.commands)
            )
        if row.targeted and mode is None:
            raise UsageRefused(
                f"{command} is a targeted command with no target ({row.targeting()}); "
                "give a mode (--mode self for your own seat)"
            )
        if not row.targeted and mode is not None:
            raise UsageRefused(f"{command} is untargeted; send it without a mode")
        payload = {} if args is None else args
        if not row.args.is_valid(payload):
            raise UsageRefused(args_refusal(command, payload) + " (refused before sending)")
        request_id = request_id or new_id()
        body = self._envelope(command, request_id, payload)
        body["op"].update(inputDigest=row.input_digest, outputDigest=row.output_digest)
        body["bind"] = {"instanceId": resolved.instance_id, "epoch": resolved.epoch}
        if mode not in (None, "self"):
            assert target is not None
            body["target"] = {
                "owner": target.owner,
                "actor": target.actor,
                "lifecycleUid": target.lifecycleUid,
            }
        request_nonce = nonce()
        msg = await self._exchange(
            self.request_subject(command, request_nonce, mode, target),
            body,
            request_nonce,
            wait_s,
            repeat=False,
        )
        reply: dict[str, Any] = json.loads(msg.data)
        if reply.get("id") != request_id:
            raise ContractError(ErrorCode.INTERNAL, "the reply does not echo the request id")
        if reply.get("ok") and not row.output.is_valid(reply.get("data")):
            raise ContractError(
                ErrorCode.CONTRACT_MISMATCH, f"the {command} reply does not fit its output schema"
            )
        return reply
