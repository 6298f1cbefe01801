"""The one boundary every tracker item passes on its way into the mirror.

An item (an issue, a pull or merge request, a timeline event, a webhook payload) is
either mapped or recorded as degraded, never raised past the sync: ``ItemBoundary.map``
runs one mapping step and turns any failure into a counted reason. A degraded item keeps
what is valid (a refused field or evidence entry is left out, the task stays); only an
item with nothing usable is skipped. Each degradation is counted by reason, kept in a
short recent list for ``/healthz``, passed to the observers (the bridge's metrics), and
logged with the item's reference and the exception's type and place, never its message:
a message may quote the refused text, which may be a secret.

The readers below (``as_dict``, ``as_str``, ...) read untrusted JSON without raising, so
the mapping modules degrade a field rather than an item.
"""

from __future__ import annotations

import logging
import traceback
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, get_args

log = logging.getLogger(__name__)

T = TypeVar("T")

# The reasons, a closed set (they label a metric).
Reason = Literal[
    "text-refused",  # a text field left out: credential-shaped or not valid text
    "text-cut",  # an over-long text field kept its first part
    "evidence-refused",  # one evidence entry left out (the task keeps the rest)
    "item-unmappable",  # an item with nothing usable: skipped
    "issue-unreadable",  # the tracker refused to read one issue: skipped this time
    "webhook-unmappable",  # a verified delivery whose payload names nothing readable
    # the evidence endpoint (GitHub's GraphQL) did not answer: the issues are mirrored
    # without the new evidence, which is read again once it answers
    "evidence-unavailable",
]
REASONS: tuple[Reason, ...] = get_args(Reason)
RECENT = 20


@dataclass(frozen=True, slots=True)
class Degradation:
    reason: Reason
    item: str  # the item's reference (a task id, "pull 12", "timeline of 7"), never its text
    detail: str  # the field, or the exception's type and place


@dataclass
class ItemBoundary:
    """Counts, recent entries and observers of one endpoint's degraded items."""

    tracker: str = "tracker"
    counts: Counter[str] = field(default_factory=Counter)
    recent: deque[Degradation] = field(default_factory=lambda: deque(maxlen=RECENT))
    observers: list[Callable[[str], None]] = field(default_factory=list)
    # Parts of the tracker's API that do not answer now (part -> why), until they do: an
    # endpoint whose evidence is degraded says so in ``/healthz`` and the sync summary.
    unavailable: dict[str, str] = field(default_factory=dict)

    def note(self, reason: Reason, item: str, detail: str = "") -> None:
        """Record one degradation (the caller has already kept what is valid)."""
        self.counts[reason] += 1
        self.recent.append(Degradation(reason, item, detail))
        log.warning("%s %s: %s%s", self.tracker, item, reason, f" ({detail})" if detail else "")
        for observer in self.observers:
            try:
                observer(reason)
            except Exception:  # an observer never costs the sync its item
                log.exception("a degradation observer failed")

    def down(self, part: str, item: str, detail: str) -> None:
        """``part`` did not answer for ``item``: counted, and marked until ``up``."""
        self.unavailable[part] = detail[:200]
        self.note("evidence-unavailable", item, detail)

    def up(self, part: str) -> None:
        """``part`` answered again."""
        if self.unavailable.pop(part, None) is not None:
            log.warning("%s %s answers again", self.tracker, part)

    def map(
        self, item: str, step: Callable[..., T], *args: Any, reason: Reason = "item-unmappable"
    ) -> T | None:
        """``step(*args)``, or ``None`` with the failure recorded under ``reason``."""
        try:
            return step(*args)
        except Exception as exc:
            self.note(reason, item, where(exc))
            return None

    def page(self, body: Any, listing: str) -> list[Any]:
        """A listing page's items; a page that is not a list counts as one unmappable item."""
        if isinstance(body, list):
            return body
        self.note("item-unmappable", f"a page of {listing}", type(body).__name__)
        return []

    def snapshot(self) -> dict[str, Any]:
        """What ``/healthz`` and the sync summary show: counts by reason, the latest few."""
        shown: dict[str, Any] = {
            "counts": {reason: self.counts[reason] for reason in REASONS if self.counts[reason]},
            "recent": [
                {"reason": d.reason, "item": d.item, **({"detail": d.detail} if d.detail else {})}
                for d in list(self.recent)[-5:]
            ],
        }
        if self.unavailable:
            shown["unavailable"] = dict(self.unavailable)
        return shown

    def total(self) -> int:
        return sum(self.counts.values())


def where(exc: BaseException) -> str:
    """An exception's type and the place it was raised, without its message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    module = last.filename.rsplit("/", 1)[-1]
    return f"{type(exc).__name__} at {module}:{last.lineno}"


# -- reading untrusted JSON without raising ---------------------------------------------


def at_path(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]…``, or ``None`` where the item has another shape: one odd
    node costs its own link, never the read."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def as_dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """A string value; a number becomes its digits; anything else ``None``."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def as_int(value: Any) -> int | None:
    """A non-negative integer (a JSON number, or a string of digits), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def epoch_ms(stamp: str | None) -> int:
    """A tracker's ISO 8601 timestamp (``2026-11-30T06:43:14Z``, with or without
    milliseconds) as epoch milliseconds; 0 when there is none."""
    if not stamp:
        return 0
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as a tracker writes a time: UTC, milliseconds, ``Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def as_ms(value: Any) -> int:
    """A tracker timestamp as epoch ms; 0 when it is missing or not a timestamp."""
    text = as_str(value)
    if text is None or text.isdigit():
        return 0
    try:
        return epoch_ms(text)
    except (ValueError, OverflowError, OSError):
        return 0


def as_stamp(value: Any) -> str | None:
    """A tracker timestamp as it was sent, when it reads as one (a cursor keeps it)."""
    return value if isinstance(value, str) and as_ms(value) > 0 else None
