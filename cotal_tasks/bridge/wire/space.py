"""The space's JetStream state the bridge reads and writes: contract artifacts, presence
cards, lifecycle heads, and (embedded mode only) the streams and buckets themselves.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import APIError, BucketNotFoundError, KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from cotal_tasks.bridge.service.commands import SeatPresence
from cotal_tasks.bridge.wire.subjects import artifact_subject, prefix, stream_names
from cotal_tasks.core import Artifact, ContractError, ErrorCode
from cotal_tasks.core.presence import PRESENCE_TTL_MS, read_presence_card

log = logging.getLogger(__name__)

PRESENCE_TTL_S = PRESENCE_TTL_MS / 1000
_ALREADY_PUBLISHED = {10071, 10164, 10077}


class SpaceNotSetUp(RuntimeError):
    """The space lacks a stream or bucket that Cotal's space setup creates."""


async def ensure_space(js: JetStreamContext, space: str, *, replicas: int = 1) -> None:
    """Create the streams and buckets a Cotal space setup would (embedded mode, and tests;
    ``replicas`` on a JetStream cluster)."""
    names = stream_names(space)
    base = prefix(space)
    for name, subjects, extra in (
        (names["contracts"], [f"{base}.epc.>"], {"max_msgs_per_subject": 1}),
        (names["events"], [f"{base}.epe.>"], {"max_age": 3600.0}),
    ):
        config = StreamConfig(
            name=name,
            subjects=subjects,
            storage=StorageType.FILE,
            allow_direct=True,
            num_replicas=replicas,
            **extra,
        )
        try:
            await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(config)
    for bucket, ttl in ((names["presence"], PRESENCE_TTL_S), (names["records"], None)):
        try:
            await js.key_value(bucket)
        except BucketNotFoundError:
            await js.create_key_value(
                KeyValueConfig(bucket=bucket, ttl=ttl, history=1, direct=True, replicas=replicas)
            )


async def publish_artifacts(
    js: JetStreamContext, space: str, artifacts: tuple[Artifact, ...]
) -> int:
    """Publish each artifact once to ``EPC_<space>``; return how many were new.

    An artifact already there is verified byte for byte: a different stored copy means
    two contracts claim one digest, which is refused rather than papered over.
    """
    stream = stream_names(space)["contracts"]
    try:
        await js.stream_info(stream)
    except NotFoundError as exc:
        raise SpaceNotSetUp(
            f"the space {space!r} has no {stream} stream. Run Cotal's space setup first, or "
            "leave nats_url unset to use the embedded broker"
        ) from exc
    fresh = 0
    for artifact in artifacts:
        subject = artifact_subject(space, artifact.hex)
        try:
            await js.publish(
                subject,
                artifact.data,
                stream=stream,
                headers={"Nats-Expected-Last-Subject-Sequence": "0"},
            )
            fresh += 1
        except APIError as exc:
            if exc.err_code not in _ALREADY_PUBLISHED:
                raise
            stored = await js.get_msg(stream, subject=subject)
            if stored.data != artifact.data:
                raise SpaceNotSetUp(
                    f"{subject} holds different bytes than the contract artifact "
                    f"{artifact.digest}. Check that every bridge in the space runs the same "
                    "contract version"
                ) from exc
    return fresh


@dataclass
class KvPresence:
    """The ``PresenceSource`` over ``cotal_presence_<space>``.

    The bucket is looked up once (``key_value`` asks the broker for the stream's info)
    and kept: a lookup is then one direct get, the claim's only round trip before its
    commit. A bucket that is missing is asked for again on the next lookup.
    """

    js: JetStreamContext
    space: str
    _kv: KeyValue | None = field(default=None, init=False, repr=False)

    async def lookup(self, owner: str, actor: str) -> SeatPresence | None:
        key = f"{owner}.{actor}"
        try:
            kv = self._kv
            if kv is None:
                kv = self._kv = await self.js.key_value(stream_names(self.space)["presence"])
            entry = await kv.get(key)
        except (BucketNotFoundError, KeyNotFoundError):
            return None
        except (NatsError, TimeoutError) as exc:
            # Presence is advisory: an unreadable card reads as no card, never as a failure.
            log.warning("presence card %s could not be read (%s); treated as absent", key, exc)
            return None
        card = read_presence_card(key, entry.value, time.time_ns() // 1_000_000)
        if card is None:
            if entry.value is not None:
                log.warning("presence card %s is not a card for this key; ignored", key)
            return None
        if card.environment_ignored:
            log.warning("presence card %s carries a non-string environment; ignored", key)
        return SeatPresence(card.lifecycle_uid, card.environment, card.online)


@dataclass(frozen=True, slots=True)
class LifecycleMapping:
    lifecycle_uid: str
    mapping_revision: int
    state: str


@dataclass
class LifecycleHeads:
    """The trusted lifecycle mapping: ``lifecycle.<owner>.<actor>`` in ``cotal_records_<s>``,
    read leader-served (``STREAM.MSG.GET``), whose sequence is the ``mappingRevision``."""

    js: JetStreamContext
    space: str

    async def current(self, owner: str, actor: str) -> LifecycleMapping | None:
        bucket = stream_names(self.space)["records"]
        key = f"lifecycle.{owner}.{actor}"
        try:
            raw = await self.js.get_msg(f"KV_{bucket}", subject=f"$KV.{bucket}.{key}")
        except NotFoundError:
            return None
        except APIError as exc:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                f"the lifecycle mapping of {owner}.{actor} cannot be read ({exc.description}). "
                "Retry, or check the space's records bucket",
            ) from exc
        headers = raw.headers or {}
        if headers.get("KV-Operation") in ("DEL", "PURGE") or not raw.data:
            return None
        try:
            head = json.loads(raw.data)
        except ValueError as exc:
            raise ContractError(
                ErrorCode.INTERNAL,
                f"the lifecycle head {key} is not JSON, so it authorizes nothing. "
                "Republish the seat's lifecycle record",
            ) from exc
        if (
            not isinstance(head, dict)
            or head.get("owner") != owner
            or head.get("actor") != actor
            or not isinstance(head.get("lifecycleUid"), str)
        ):
            raise ContractError(
                ErrorCode.INTERNAL,
                f"the lifecycle head {key} is malformed, so it authorizes nothing. "
                "Republish the seat's lifecycle record",
            )
        return LifecycleMapping(head["lifecycleUid"], int(raw.seq or 0), str(head.get("state")))
