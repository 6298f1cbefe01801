"""The command table of section 1, as data.

One row per command: class, effect (authoring intent; never put on the wire at
``protocol.v: 1``), targeting, the modes a targeted command admits, the capability, the
idempotency key, the input and output shapes, and an example input that must validate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from cotal_tasks.core.errors import ErrorCode
from cotal_tasks.core.messages import (
    AdministerTaskInput,
    BindTaskInput,
    ClaimTaskInput,
    CreateTaskInput,
    GetTaskInput,
    Input,
    ListTasksInput,
    MyTasksInput,
    TaskPage,
    UpdateTaskInput,
)
from cotal_tasks.core.models import Record, Task

Mode = Literal["self", "owner", "any"]
# The modes of the ai.cotal.tasks commands, by their name on the wire.
MODES: dict[str, Mode] = {mode: mode for mode in get_args(Mode)}
Effect = Literal["read", "write"]
IdempotencyKey = Literal["none", "envelope-id", "task-and-target", "task-and-caller"]

CLUSTER_URN = "ai.cotal.tasks"
CLUSTER_REVISION = 1
BOARD_CHANGED = "board-changed"
BOARD_CHANGED_TOPIC = "ev.ai_cotal_tasks.board-changed"
CAPABILITIES = ("tasks.read", "tasks.self", "tasks.write", "tasks.bind", "tasks.admin")


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    effect: Effect
    modes: tuple[Mode, ...]  # empty: untargeted
    capability: str
    idempotency: IdempotencyKey
    input: type[Input]
    output: type[Record]
    example: Mapping[str, Any] = field(default_factory=dict)
    cls: Literal["ephemeral"] = "ephemeral"

    @property
    def targeted(self) -> bool:
        return bool(self.modes)

    def targeting(self) -> str:
        """The targeting shape as ``describe`` prints it."""
        return targeting(self.modes)


def targeting(modes: Sequence[str]) -> str:
    """The targeting shape of a command admitting ``modes`` (none: untargeted), as
    ``describe`` prints it."""
    if not modes:
        return "untargeted"
    word = "mode" if len(modes) == 1 else "modes"
    return f"targeted, {word} " + " and ".join(modes)


@dataclass(frozen=True, slots=True)
class ModeRefusal:
    """Why a call's mode or target does not fit its command: the code and the message."""

    code: ErrorCode
    message: str


def mode_refusal(
    name: str,
    modes: Sequence[str],
    mode: str | None,
    *,
    target_given: bool,
    target_is_caller: bool = False,
) -> ModeRefusal | None:
    """Mode admission per the command table, before anything runs; None when admitted.

    An untargeted command takes no mode and no target; a targeted one takes one of its
    modes; mode ``self`` acts on the caller (no target, or the caller's own seat), every
    other mode needs a target seat.
    """
    if not modes:
        if mode is not None or target_given:
            return ModeRefusal(
                ErrorCode.PERMISSION_DENIED,
                f"{name} is untargeted. Send it without a mode or target",
            )
        return None
    if mode not in modes:
        return ModeRefusal(
            ErrorCode.PERMISSION_DENIED,
            f"{name} is {targeting(modes)}; mode {mode or 'untargeted'} is not admitted. "
            f"Send it with mode {' or '.join(modes)}",
        )
    if mode == "self" and target_given and not target_is_caller:
        return ModeRefusal(
            ErrorCode.TARGET_MISMATCH,
            f"{name} at mode self acts on the caller itself. Send no target",
        )
    if mode != "self" and not target_given:
        return ModeRefusal(
            ErrorCode.BAD_REQUEST,
            f"{name} at mode {mode} needs a target seat. Give one (owner, actor, lifecycleUid)",
        )
    return None


_TASK = {"taskId": "b-7k2m9q"}

_ROWS = (
    CommandSpec("list-tasks", "read", (), "tasks.read", "none", ListTasksInput, TaskPage,
                {"limit": 50, "status": ["open", "claimed"]}),
    CommandSpec("get-task", "read", (), "tasks.read", "none", GetTaskInput, Task, _TASK),
    CommandSpec("my-tasks", "read", ("self",), "tasks.self", "none", MyTasksInput, TaskPage,
                {"limit": 20}),
    CommandSpec("create-task", "write", (), "tasks.write", "envelope-id", CreateTaskInput, Task,
                {"title": "Rotate the staging certificates", "brief": "Before Friday."}),
    CommandSpec("bind-task", "write", ("owner", "any"), "tasks.bind", "task-and-target",
                BindTaskInput, Task, {**_TASK, "expectedBinding": None}),
    CommandSpec("claim-task", "write", ("self",), "tasks.self", "task-and-caller",
                ClaimTaskInput, Task, _TASK),
    CommandSpec("update-task", "write", ("self",), "tasks.self", "envelope-id", UpdateTaskInput,
                Task, {**_TASK, "status": "done",
                       "evidence": [{"kind": "commit", "ref": "9f2c1e7"}], "note": "Merged."}),
    CommandSpec("administer-task", "write", (), "tasks.admin", "envelope-id",
                AdministerTaskInput, Task, {**_TASK, "unbind": True, "note": "Seat is gone."}),
)  # fmt: skip

COMMANDS: Mapping[str, CommandSpec] = MappingProxyType({row.name: row for row in _ROWS})
