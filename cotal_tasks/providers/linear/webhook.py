"""Linear webhooks (``POST /webhooks/linear``): verify ``Linear-Signature``, refuse a
replay, and name the issues a delivery touches.

Linear signs each delivery with the webhook's signing secret: ``Linear-Signature`` is
the hex HMAC-SHA256 of the raw body, compared in constant time; the signed body carries
``webhookTimestamp`` (epoch ms), and a delivery more than ``MAX_SKEW_MS`` away from this
bridge's clock is refused like an unsigned one, so a captured delivery cannot be played
again later. The delivery id is ``Linear-Delivery`` (the same on Linear's retries), the
entity type ``Linear-Event``.

A Linear webhook belongs to a workspace (or one team), not to one endpoint's teams, so a
delivery goes to the verified endpoint that syncs the team its issue is in (the team key
of its identifier, or of an identifier it had before a move); none: 404. An ``Issue``
delivery wakes its issue, a ``Comment``, ``Attachment`` or ``Reaction`` the issue it
names; a renamed or removed label (``IssueLabel``) asks the next poll to read every issue
again, since the rules read labels by name; any other type is acknowledged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_list, as_str, at_path
from cotal_tasks.providers.hosted.webhook import Scheme
from cotal_tasks.providers.linear import mapping
from cotal_tasks.providers.linear.tracker import LinearTracker
from cotal_tasks.providers.provider import Looked

SIGNATURE_HEADER = "linear-signature"
DELIVERY_HEADER = "linear-delivery"
EVENT_HEADER = "linear-event"
MAX_SKEW_MS = 60_000
NAMING = frozenset({"Issue", "Comment", "Attachment", "Reaction"})
EVENTS = frozenset(
    {*NAMING, "IssueLabel", "Project", "ProjectUpdate", "Cycle", "IssueSLA", "AgentSessionEvent"}
)


def signature_valid(secret: bytes, body: bytes, header: str | None, now_ms: int) -> bool:
    """The signature matches the raw body and the signed ``webhookTimestamp`` is fresh."""
    if not header:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), header.strip().lower().encode()):
        return False
    try:
        stamp = as_int(as_dict(json.loads(body)).get("webhookTimestamp"))
    except (ValueError, RecursionError):
        return False
    return stamp is not None and abs(now_ms - stamp) <= MAX_SKEW_MS


def _identifiers(payload: Mapping[str, Any]) -> list[str]:
    kind = as_str(payload.get("type"))
    data = as_dict(payload.get("data"))
    if kind == "Issue":
        found = [as_str(data.get("identifier"))]
        found += [as_str(x) for x in as_list(data.get("previousIdentifiers"))]
    elif kind in NAMING:
        found = [as_str(at_path(data, "issue", "identifier"))]
    else:
        found = []
    return [x for x in found if x]


def issues_named(payload: Mapping[str, Any], teams: Sequence[str]) -> set[int] | None:
    """The synced issues a delivery names; ``None``: it names an issue, of no synced team."""
    identifiers = _identifiers(payload)
    ours = {
        number
        for identifier in identifiers
        if (parsed := mapping.split(identifier)) and parsed[0] in teams
        if (number := mapping.number_of(identifier)) is not None
    }
    if identifiers and not ours:
        return None
    return ours


def named(tracker: LinearTracker, event: str, payload: Mapping[str, Any]) -> set[int]:
    return issues_named(payload, tracker.teams) or set()


async def lookup(
    tracker: LinearTracker, most: int, event: str, payload: Mapping[str, Any]
) -> Looked | None:
    """What a delivery names of ``tracker``'s teams (read from the payload alone)."""
    if as_str(payload.get("type")) == "IssueLabel" and payload.get("action") in (
        "update",
        "remove",
    ):
        return Looked(None)  # the rules read labels by name: read every issue again
    numbers = issues_named(payload, tracker.teams)
    return None if numbers is None else Looked(frozenset(numbers))


SCHEME: Scheme[LinearTracker] = Scheme(
    tracker="linear",
    label="Linear",
    what="team",
    mismatch="the Linear-Signature does not match, or the delivery's webhookTimestamp is "
    f"more than {MAX_SKEW_MS // 1000} s from this bridge's clock (a replay). Set the "
    "webhook's signing secret in Linear to the one the endpoint's webhook_secret_env names, "
    "and keep this machine's clock synchronised",
    event_header=EVENT_HEADER,
    verify=lambda secret, headers, body: signature_valid(
        secret, body, headers.get(SIGNATURE_HEADER), round(time.time() * 1000)
    ),
    source=lambda payload: (None, None),
    delivery=lambda headers, _payload: headers.get(DELIVERY_HEADER),
    named=named,
    lookup=lookup,
    lookup_events=EVENTS,
)
WEBHOOK = SCHEME.webhook()
