"""A presence card as the space's presence bucket holds it, read once for every reader.

The key is ``<owner>.<actor>``; a card whose ``card.id`` differs from its key is dropped.
``ts`` is the heartbeat's epoch milliseconds: anything but an integer (a boolean included)
is no timestamp, and a card without one is never fresh. A card is online when its ``ts``
is within the bucket's TTL and its ``status`` is not ``offline``. ``environment`` is
opaque and copied verbatim when it is a string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PRESENCE_TTL_MS = 6000


@dataclass(frozen=True, slots=True)
class PresenceCard:
    """What the tasks provider needs of one presence card."""

    lifecycle_uid: str | None
    ts: int | None
    online: bool  # fresh when read, and not reporting itself offline
    environment: str | None = None
    environment_ignored: bool = False  # the card carried a non-string environment


def read_presence_card(key: str, raw: bytes | None, now_ms: int) -> PresenceCard | None:
    """The card stored under ``key``, read at ``now_ms``; None when absent or not a card."""
    if raw is None:
        return None
    try:
        card = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(card, dict) or not isinstance(card.get("card"), dict):
        return None
    if card["card"].get("id") != key:
        return None
    ts = card.get("ts")
    ts = ts if isinstance(ts, int) and not isinstance(ts, bool) else None
    online = ts is not None and now_ms - ts <= PRESENCE_TTL_MS and card.get("status") != "offline"
    uid = card.get("lifecycleUid")
    environment = card.get("environment")
    return PresenceCard(
        uid if isinstance(uid, str) else None,
        ts,
        online,
        environment if isinstance(environment, str) else None,
        environment is not None and not isinstance(environment, str),
    )
