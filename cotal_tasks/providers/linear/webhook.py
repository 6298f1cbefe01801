"""Linear webhooks (``POST /webhooks/linear``): verify ``Linear-Signature``, refuse a
replay, and name the issues a delivery touches.

Linear signs each delivery with the webhook's signing secret: ``Linear-Signature`` is
the hex HMAC-SHA256 of the raw body, compared in constant time; the signed body carries
``webhookTimestamp`` (epoch ms), and a delivery more than ``MAX_SKEW_MS`` away from this
bridge's clock is refused like an unsigned one, so a captured delivery cannot be played
again later. The delivery id is ``Linear-Delivery`` (the same on Linear's retries), the
entity type ``Linear-Event``.

A Linear webhook belongs to a workspace (or one team), not to one endpoint's teams, so a
delivery goes to the verified endpoint, and within it the team (each team is a source
with its own sync), that syncs the team its issue is in now (the team key of its
identifier); an issue that moved to a team outside the endpoint goes to the team its task
is of (the first of the endpoint's in its history), which reads it as having left; none:
404. The issue woken is its task (``mapping.task_identifier``). An ``Issue``
delivery wakes its issue, a ``Comment``, ``Attachment`` or ``Reaction`` the issue it
names; a renamed or removed label (``IssueLabel``) asks the next poll to read every issue
again, since the rules read labels by name; any other type is acknowledged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str
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


def _history(payload: Mapping[str, Any]) -> list[str]:
    """The identifiers the delivery's issue has had, the one it has now last."""
    kind = as_str(payload.get("type"))
    data = as_dict(payload.get("data"))
    if kind == "Issue":
        return mapping.history(data)
    if kind in NAMING:
        return mapping.history(as_dict(data.get("issue")))
    return []


def issues_named(payload: Mapping[str, Any], tracker: LinearTracker) -> set[int] | None:
    """The task a delivery names, when it is of ``tracker``'s team: the issue is in that
    team now, or it left the endpoint for another team and its task is of this one.
    ``None``: it names an issue of another source (or of none)."""
    found = _history(payload)
    if not found:
        return set()
    now = mapping.split(found[-1])
    team = now[0] if now else None
    teams = tracker.endpoint_teams
    task = mapping.task_identifier(
        {"identifier": found[-1], "previousIdentifiers": found[:-1]}, teams
    )
    if task is None:
        return None
    mine = team == tracker.team or (team not in teams and task.startswith(tracker.team + "-"))
    number = mapping.number_of(task)
    return {number} if mine and number is not None else None


def named(tracker: LinearTracker, most: int, event: str, payload: Mapping[str, Any]) -> set[int]:
    return issues_named(payload, tracker) or set()  # one issue at most: ``most`` never binds


async def lookup(
    tracker: LinearTracker, most: int, event: str, payload: Mapping[str, Any]
) -> Looked | None:
    """What a delivery names of ``tracker``'s team (read from the payload alone); a
    label renamed or removed: every issue again."""
    if as_str(payload.get("type")) == "IssueLabel" and payload.get("action") in (
        "update",
        "remove",
    ):
        return Looked(None)  # the rules read labels by name: read every issue again
    numbers = issues_named(payload, tracker)
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
    delivery_header=DELIVERY_HEADER,
    named=named,
    lookup=lookup,
    lookup_events=EVENTS,
)
WEBHOOK = SCHEME.webhook()
