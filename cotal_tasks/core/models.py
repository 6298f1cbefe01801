"""The task record of section 2, closed and frozen.

Field names are the contract's own (``taskId``, ``lifecycleUid``): these models *are*
the wire shapes, so there is no alias layer to keep in step. New states are built
through validation (``Task.model_validate``), never ``model_copy(update=…)``, so every
record that exists has passed every bound.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
    model_validator,
)

from cotal_tasks.core.text import TaskText

TASK_VERSION = "ai.cotal.tasks.task/v1"
MAX_EVIDENCE = 32
TITLE_BYTES, BRIEF_BYTES, SOURCE_BYTES = 200, 4096, 64  # title, brief and note, statusSource

Text128 = Annotated[str, TaskText(128)]
Text200 = Annotated[str, TaskText(TITLE_BYTES)]
Text512 = Annotated[str, TaskText(512)]
Text2048 = Annotated[str, TaskText(2048)]
Text4096 = Annotated[str, TaskText(BRIEF_BYTES)]
StatusSourceText = Annotated[str, TaskText(SOURCE_BYTES)]
# The largest integer a JSON number carries exactly (IEEE 754 doubles): the bound of every
# integer the contract sends, epoch milliseconds and counters alike.
MAX_SAFE_INT = 2**53 - 1
EpochMs = Annotated[int, Field(ge=0, le=MAX_SAFE_INT, strict=True)]
Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INT, strict=True)]


def _only_true(value: bool) -> bool:
    if value is not True:
        raise ValueError("only true is allowed here; omit the field instead of sending false")
    return value


# A flag whose only value is ``true`` (absent means false). Strict: 1 and "true" are refused.
TrueFlag = Annotated[bool, Strict(), AfterValidator(_only_true), WithJsonSchema({"const": True})]


TaskStatus = Literal["open", "claimed", "blocked", "done", "dropped"]
STATUSES: tuple[TaskStatus, ...] = ("open", "claimed", "blocked", "done", "dropped")
TERMINAL: frozenset[TaskStatus] = frozenset({"done", "dropped"})


def is_terminal(status: TaskStatus) -> bool:
    """Whether ``status`` ends the work (``done`` or ``dropped``)."""
    return status in TERMINAL


NEEDS_BINDING: frozenset[TaskStatus] = frozenset({"claimed", "blocked"})


EvidenceKind = Literal["commit", "branch", "run", "review"]


# The one policy of every closed model, contract shapes and settings alike: an unknown key
# is refused, a model never changes once built, and no error text quotes a refused value
# (hide_input_in_errors: it may be a secret).
CLOSED = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Settings(BaseModel):
    """Base of every settings model (the bridge's and each provider's): closed (an unknown
    key is refused), frozen, and a refused value is never quoted (it may be a secret)."""

    model_config = CLOSED


class Record(BaseModel):
    """Base of every contract shape: closed and frozen; text and integers are strict."""

    model_config = CLOSED

    def to_json(self) -> dict[str, object]:
        """The wire form: absent optional fields are omitted, never sent as null."""
        return self.model_dump(mode="json", exclude_none=True)


class BindingRef(Record):
    """The three coordinates of a binding, without its recorded metadata."""

    owner: Text128
    actor: Text128
    lifecycleUid: Text128


class TaskBinding(Record):
    owner: Text128
    actor: Text128
    lifecycleUid: Text128
    environment: Text2048 | None = None
    environmentWithheld: TrueFlag | None = None
    boundAt: EpochMs
    boundBy: Text128

    @model_validator(mode="after")
    def _one_environment_outcome(self) -> TaskBinding:
        if self.environment is not None and self.environmentWithheld:
            raise ValueError(
                "a binding carries environment or environmentWithheld, never both: "
                "a withheld value is not published"
            )
        return self

    def ref(self) -> BindingRef:
        return BindingRef(owner=self.owner, actor=self.actor, lifecycleUid=self.lifecycleUid)

    def names(self, owner: str, actor: str, lifecycle_uid: str) -> bool:
        """True when this binding is to exactly that triple."""
        return (self.owner, self.actor, self.lifecycleUid) == (owner, actor, lifecycle_uid)


class TaskEvidence(Record):
    kind: EvidenceKind
    ref: Text512
    addedAt: EpochMs


class StaleMarker(Record):
    staleAsOf: EpochMs
    reason: Text512


class TaskSummary(Record):
    """A task without brief and evidence: what a page carries."""

    version: Literal["ai.cotal.tasks.task/v1"]
    taskId: Text128
    space: Text128
    title: Text200
    status: TaskStatus
    statusSource: StatusSourceText | None = None
    binding: TaskBinding | None = None
    createdAt: EpochMs
    updatedAt: EpochMs


class Task(Record):
    version: Literal["ai.cotal.tasks.task/v1"]
    taskId: Text128
    space: Text128
    title: Text200
    brief: Text4096 | None = None
    status: TaskStatus
    statusSource: StatusSourceText | None = None
    binding: TaskBinding | None = None
    evidence: Annotated[tuple[TaskEvidence, ...], Field(max_length=MAX_EVIDENCE)]
    createdAt: EpochMs
    updatedAt: EpochMs

    def summary(self) -> TaskSummary:
        return TaskSummary.model_validate(self.model_dump(exclude={"brief", "evidence"}))
