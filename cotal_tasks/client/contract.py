"""The endpoint's contract as a caller resolves it: the describe answer, then every
document it names fetched from ``EPC_<space>`` and verified (Cotal SPEC §13.7).

Each digest the describe answer or the cluster document names is a closure digest: the
``sha256`` of a manifest ``{"v":1,"root":…,"members":[]}`` whose ``root`` names the
document. Both are fetched by direct get and both must hash to the digest that named
them and be canonical JSON, so a store that serves other bytes never authorizes
anything. The command rows, and so the digests every request pins, come from those
verified bytes, never from the caller's own copy of the contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError

from cotal_tasks.client.errors import TasksError
from cotal_tasks.client.subjects import Responder, artifact_subject, contracts_stream
from cotal_tasks.core import CLUSTER_URN, ErrorCode, canonical_json, digest
from cotal_tasks.core.commands import targeting

STORE_TIMEOUT_S = 5.0
_DIGEST_PREFIX = "sha256:"


def _invalid(what: str) -> TasksError:
    """The endpoint's contract cannot be trusted: ``what`` is wrong with it."""
    return TasksError(
        ErrorCode.CONTRACT_INVALID,
        f"{what}. Nothing was sent; report the endpoint's contract to its operator",
        outcome="not-executed",
    )


@dataclass(frozen=True, slots=True)
class CommandContract:
    """One command row of the cluster document, with its schemas compiled."""

    name: str
    capability: str
    targeted: bool
    modes: tuple[str, ...]
    input_digest: str
    output_digest: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    args: Any  # a compiled jsonschema_rs validator
    output: Any

    def targeting(self) -> str:
        """The targeting shape, as ``describe`` prints it."""
        return targeting(self.modes)


@dataclass(frozen=True, slots=True)
class Service:
    """A resolved endpoint: who answered the describe, and its verified commands."""

    endpoint: str
    owner: str
    responder: Responder
    cluster_digest: str
    urn: str
    revision: int
    commands: Mapping[str, CommandContract]
    event: Any | None  # the board-changed data validator, when the document names one
    descriptor: Mapping[str, Any]  # the describe answer's descriptor, as sent
    document: Mapping[str, Any]  # the verified cluster document

    @property
    def instance_id(self) -> str:
        return self.responder.instance_id

    @property
    def epoch(self) -> int:
        return self.responder.epoch

    def bind(self) -> dict[str, Any]:
        """The ``bind`` block a request carries: this incarnation or none."""
        return {"instanceId": self.responder.instance_id, "epoch": self.responder.epoch}


class ContractStore:
    """Reads and verifies artifacts of one space's ``EPC_<space>``, each once."""

    def __init__(self, nc: NATS, space: str) -> None:
        self.nc = nc
        self.space = space
        self._memo: dict[str, Any] = {}

    async def artifact(self, digest_text: str) -> Any:
        if digest_text in self._memo:
            return self._memo[digest_text]
        if not isinstance(digest_text, str) or not digest_text.startswith(_DIGEST_PREFIX):
            raise _invalid(f"{digest_text!r} is not a sha256:<hex> digest")
        stream = contracts_stream(self.space)
        subject = artifact_subject(self.space, digest_text.removeprefix(_DIGEST_PREFIX))
        try:
            msg = await self.nc.request(
                f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=STORE_TIMEOUT_S
            )
        except (NatsError, TimeoutError) as exc:
            raise TasksError(
                ErrorCode.UNAVAILABLE,
                f"the contract store {stream} did not answer for {digest_text} "
                f"({type(exc).__name__}). Check the space is set up and this credential may "
                "read it",
                outcome="not-executed",
            ) from exc
        status = msg.headers.get("Status") if msg.headers else None
        if status is not None:
            raise _invalid(
                f"artifact {digest_text} is not in {stream} (status {status}); the endpoint "
                "names a contract it has not published"
            )
        if digest(msg.data) != digest_text:
            raise _invalid(f"the bytes {stream} holds for {digest_text} do not hash to it")
        try:
            value = json.loads(msg.data)
        except ValueError as exc:
            raise _invalid(f"artifact {digest_text} is not JSON") from exc
        if canonical_json(value) != msg.data:
            raise _invalid(f"artifact {digest_text} is not canonical JSON (RFC 8785)")
        self._memo[digest_text] = value
        return value

    async def closure(self, closure_digest: str) -> Any:
        """The root document of the closure manifest at ``closure_digest``."""
        manifest = await self.artifact(closure_digest)
        if (
            not isinstance(manifest, dict)
            or manifest.get("v") != 1
            or manifest.get("members") != []
            or not isinstance(manifest.get("root"), str)
        ):
            raise _invalid(f"{closure_digest} is not a v1 manifest with a root and no members")
        return await self.artifact(manifest["root"])

    async def validator(self, closure_digest: str) -> tuple[Mapping[str, Any], Any]:
        schema = await self.closure(closure_digest)
        try:
            return schema, jsonschema_rs.validator_for(schema)
        except (ValueError, jsonschema_rs.ValidationError) as exc:
            raise _invalid(f"schema {closure_digest} does not compile: {exc}") from exc


def _field(value: Any, key: str, kind: type, what: str) -> Any:
    got = value.get(key) if isinstance(value, dict) else None
    if not isinstance(got, kind) or isinstance(got, bool) is not (kind is bool):
        raise _invalid(f"{what} has no valid {key!r}; the endpoint's contract is malformed")
    return got


async def resolve(
    store: ContractStore, endpoint: str, answer: Any, responder: Responder
) -> Service:
    """Verify ``answer`` (the describe data) and build the service from the store."""
    descriptor = _field(answer, "descriptor", dict, "the describe answer")
    if _field(descriptor, "endpoint", str, "the descriptor") != endpoint:
        raise _invalid(f"the describe answer describes {descriptor['endpoint']!r}, not {endpoint}")
    owner = _field(descriptor, "owner", str, "the descriptor")
    for cluster in _field(descriptor, "clusters", list, "the descriptor"):
        cluster_digest = _field(cluster, "digest", str, "a cluster")
        visible = set(_field(cluster, "commands", list, "a cluster"))
        document = await store.closure(cluster_digest)
        if not isinstance(document, dict) or document.get("urn") != CLUSTER_URN:
            continue
        commands: dict[str, CommandContract] = {}
        for row in _field(document, "commands", list, "the cluster document"):
            name = _field(row, "name", str, "a command row")
            if name not in visible:
                continue  # a describe view may narrow the cluster's commands
            in_schema, args = await store.validator(_field(row, "inputDigest", str, name))
            out_schema, output = await store.validator(_field(row, "outputDigest", str, name))
            commands[name] = CommandContract(
                name,
                _field(row, "capability", str, name),
                _field(row, "targeted", bool, name),
                tuple(row.get("modes") or ()),
                row["inputDigest"],
                row["outputDigest"],
                in_schema,
                out_schema,
                args,
                output,
            )
        event = None
        for row in document.get("events") or ():
            if isinstance(row, dict) and isinstance(row.get("dataDigest"), str):
                event = (await store.validator(row["dataDigest"]))[1]
        return Service(
            endpoint,
            owner,
            responder,
            cluster_digest,
            CLUSTER_URN,
            _field(document, "revision", int, "the cluster document"),
            commands,
            event,
            descriptor,
            document,
        )
    raise TasksError(
        ErrorCode.NOT_FOUND,
        f"{endpoint} serves no {CLUSTER_URN} cluster to this caller. Check the endpoint name "
        "and that this seat is granted its commands",
        outcome="not-executed",
    )
