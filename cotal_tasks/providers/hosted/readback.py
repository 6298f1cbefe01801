"""A rule set must read back what write-back writes.

Each tracker declares its status labels once (its config's ``claimed_label``,
``blocked_label``, ...): the write plan writes them, the default rules read them, and
``written_states`` says what an issue looks like after write-back wrote each status. A
configured rule set that reads one of those as another status (a write of ``blocked``
that reads back as ``open``) is refused when the settings are read, so ``check-config``
and the bridge's start say so instead of the mirror quietly disagreeing with its writes.
A tracker whose writes are states and labels (GitHub, GitLab) takes ``ReadsBackWrites``
as its settings' base, which checks it once for both.

Pure.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar, Self

from pydantic import model_validator

from cotal_tasks.core import TaskStatus
from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule
from cotal_tasks.providers.hosted.mapping import evaluate
from cotal_tasks.providers.hosted.tracker import NativeState


def _shown(native: NativeState) -> str:
    parts = [native.state]
    if native.state_reason:
        parts.append(f"state_reason {native.state_reason}")
    if native.labels:
        parts.append("label " + ", ".join(repr(label) for label in native.labels))
    return " with ".join(parts)


def unreadable(
    rules: Sequence[StatusRule], written: Mapping[TaskStatus, NativeState]
) -> str | None:
    """What the rules fail to read back of ``written`` (status -> the issue write-back
    leaves), as a message naming the remedy; ``None`` when they read every status back.
    ``claimed`` may read as ``open``: a bound seat makes an open issue ``claimed``."""
    wrong = []
    for status, native in written.items():
        got, _ = evaluate(rules, native)
        if got != status and not (status == "claimed" and got == "open"):
            wrong.append(f"{status} is written as {_shown(native)}, which the rules read as {got}")
    if not wrong:
        return None
    return (
        "status_rules do not read back what write-back writes: "
        + "; ".join(wrong)
        + ". Add a rule for each (its status and label) before the rule that matches it "
        "now, or set the *_label settings to labels the rules read"
    )


def written_states(
    labels: Mapping[TaskStatus, str],
    *,
    opened: str,
    closed: str = "closed",
    reasons: Mapping[TaskStatus, str] | None = None,
) -> dict[TaskStatus, NativeState]:
    """What an issue looks like after write-back wrote each status: its state (``opened``
    or ``closed``), the close reason it keeps, if any, and the status's label."""
    reasons = reasons or {}

    def native(status: TaskStatus, state: str) -> NativeState:
        label = labels.get(status)
        return NativeState(state, reasons.get(status), (label,) if label else ())

    return {
        "open": native("open", opened),
        "claimed": native("claimed", opened),
        "blocked": native("blocked", opened),
        "done": native("done", closed),
        "dropped": native("dropped", closed),
    }


class ReadsBackWrites(HostedConfig):
    """The settings of a tracker whose writes are a state and labels: its rules must read
    back what write-back writes, checked when the settings are read."""

    OPENED: ClassVar[str]  # the tracker's open state ("open", "opened")
    CLOSE_REASONS: ClassVar[Mapping[TaskStatus, str]] = {}  # the reason a close keeps

    @abstractmethod
    def status_labels(self) -> dict[TaskStatus, str]:
        """Status -> the label write-back writes for it."""

    def written_states(self) -> dict[TaskStatus, NativeState]:
        return written_states(self.status_labels(), opened=self.OPENED, reasons=self.CLOSE_REASONS)

    @model_validator(mode="after")
    def _rules_read_back_the_writes(self) -> Self:
        if problem := unreadable(self.status_rules, self.written_states()):
            raise ValueError(problem)
        return self
