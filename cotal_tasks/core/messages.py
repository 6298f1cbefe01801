"""Input and output shapes of the eight commands and of the ``board-changed`` event.

Inputs refuse unknown fields and refuse ``null`` for every optional field except the
ones a command gives a meaning to (``bind-task``'s ``expectedBinding``: null asserts the
task is unbound, absent means no check). ``fields_set`` tells absent from null.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from cotal_tasks.core.models import (
    MAX_EVIDENCE,
    BindingRef,
    Count,
    EpochMs,
    EvidenceKind,
    Record,
    StaleMarker,
    TaskStatus,
    TaskSummary,
    Text128,
    Text200,
    Text512,
    Text4096,
    TrueFlag,
)

MAX_CURSOR = 512
Cursor = Annotated[str, Field(min_length=1, max_length=MAX_CURSOR, pattern=r"^[A-Za-z0-9_-]+$")]
Limit = Annotated[int, Field(ge=1, le=2**31 - 1, strict=True)]
CreateStatus = Literal["open", "done", "dropped"]
UpdateStatus = Literal["claimed", "blocked", "done", "dropped"]


class Input(Record):
    """Base of command inputs: explicit ``null`` only where ``nullable`` allows it."""

    nullable: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                if value is None and key in cls.model_fields and key not in cls.nullable:
                    raise ValueError(f"{key} may not be null; omit the field instead")
        return data


class EvidenceInput(Record):
    """Evidence as a caller supplies it; the provider stamps ``addedAt``."""

    kind: EvidenceKind
    ref: Text512


Evidence = Annotated[tuple[EvidenceInput, ...], Field(max_length=MAX_EVIDENCE)]


class ListTasksInput(Input):
    cursor: Cursor | None = None
    limit: Limit | None = None
    status: Annotated[tuple[TaskStatus, ...], Field(min_length=1, max_length=5)] | None = None


class MyTasksInput(Input):
    cursor: Cursor | None = None
    limit: Limit | None = None


class TaskPage(Record):
    """The page ``list-tasks`` and ``my-tasks`` answer."""

    tasks: tuple[TaskSummary, ...]
    appliedLimit: Annotated[int, Field(ge=1, le=2**31 - 1, strict=True)]
    nextCursor: Cursor | None = None
    observedAt: EpochMs
    changeSeq: Count
    stale: StaleMarker | None = None


class GetTaskInput(Input):
    taskId: Text128


class CreateTaskInput(Input):
    title: Text200
    brief: Text4096 | None = None
    status: CreateStatus | None = None
    evidence: Evidence | None = None


class BindTaskInput(Input):
    nullable: ClassVar[frozenset[str]] = frozenset({"expectedBinding"})

    taskId: Text128
    expectedBinding: BindingRef | None = None

    @property
    def checks_binding(self) -> bool:
        """True when the caller sent ``expectedBinding`` (a ref or an explicit null)."""
        return "expectedBinding" in self.model_fields_set


class ClaimTaskInput(Input):
    taskId: Text128


class UpdateTaskInput(Input):
    taskId: Text128
    status: UpdateStatus | None = None
    brief: Text4096 | None = None
    evidence: Evidence | None = None
    note: Text4096 | None = None


class AdministerTaskInput(Input):
    taskId: Text128
    status: TaskStatus | None = None
    unbind: TrueFlag | None = None
    note: Text4096 | None = None


class BoardChanged(Record):
    """The ``board-changed`` event payload: a wake, never a fact about any task."""

    changeSeq: Count
    observedAt: EpochMs
