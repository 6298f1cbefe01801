"""The seat's tools for a coding agent: which commands it may use, and calling them.

An agent gets ``my_tasks``, ``get_task``, ``claim_task`` and ``update_task``, and
``list_tasks`` and ``create_task`` besides, each only where its seat holds the grant. That
is asked, never guessed: describe must show the command to the seat, and the broker must
carry a probe of it. The probe is harmless: reads run as reads, and every other command
is sent with empty args, which the endpoint refuses as ``bad-request`` before anything
runs. A publish the broker refuses means the seat lacks the grant, and the tool is left
out. Every tool acts as the seat and only the seat: the targeted ones are sent at mode
``self``, and no tool takes a seat or target argument (the input schemas, which are the
contract's own, are closed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.client import CommandContract, ErrorCode, Mode, TasksClient, TasksError


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    command: str
    mode: Mode | None
    description: str


TOOLS = (
    ToolSpec(
        "my_tasks",
        "my-tasks",
        "self",
        "List the tasks bound to you (this seat), a page at a time. Pass the page's "
        "nextCursor as cursor to read the next page.",
    ),
    ToolSpec(
        "get_task",
        "get-task",
        None,
        "Read one task whole by its taskId: title, brief, status, binding and evidence.",
    ),
    ToolSpec(
        "claim_task",
        "claim-task",
        "self",
        "Claim an open task: bind it to you and move it to claimed. Claiming a task you "
        "already hold returns it unchanged; a task bound to another seat is refused.",
    ),
    ToolSpec(
        "update_task",
        "update-task",
        "self",
        "Update a task bound to you: status (claimed, blocked, done, dropped), a note, "
        "evidence (kind commit, branch, run or review, with its ref) or a new brief. Record "
        "evidence of the work when you move a task to done.",
    ),
    ToolSpec(
        "list_tasks",
        "list-tasks",
        None,
        "List the board, a page at a time, optionally by status (open, claimed, blocked, "
        "done, dropped). Pass the page's nextCursor as cursor to read the next page.",
    ),
    ToolSpec(
        "create_task",
        "create-task",
        None,
        "Create a new task on the board (unbound; open unless status says done or dropped).",
    ),
)


@dataclass(frozen=True, slots=True)
class Offered:
    spec: ToolSpec
    contract: CommandContract


@dataclass
class ToolResult:
    """What a tool call answers: the result, or a refusal with its code and remedy."""

    data: Mapping[str, Any] | None = None
    error: TasksError | None = None

    @property
    def text(self) -> str:
        if self.error is not None:
            e = self.error
            return f"{e.code.value} (outcome {e.outcome}): {e.message}"
        return json.dumps(self.data, ensure_ascii=False)


@dataclass
class SeatTools:
    """The tools one seat may use on one endpoint, over its client."""

    client: TasksClient
    offered: dict[str, Offered] = field(default_factory=dict)
    withheld: dict[str, str] = field(default_factory=dict)  # tool -> why it is not offered

    async def discover(self) -> SeatTools:
        """Describe the endpoint and probe each command; offer what the seat may use."""
        service = await self.client.describe()
        self.offered.clear()
        self.withheld.clear()
        shown = [(spec, service.commands.get(spec.command)) for spec in TOOLS]
        # The probes go out together: a session start waits for one round trip, not six.
        granted = await asyncio.gather(
            *(self._granted(spec) for spec, row in shown if row is not None)
        )
        answers = iter(granted)
        for spec, row in shown:
            if row is None:
                self.withheld[spec.name] = f"describe shows this seat no {spec.command}"
            elif not next(answers):
                self.withheld[spec.name] = f"the broker refuses this seat's {spec.command}"
            else:
                self.offered[spec.name] = Offered(spec, row)
        return self

    async def _granted(self, spec: ToolSpec) -> bool:
        try:
            await self.client.invoke_answer(spec.command, {}, mode=spec.mode, check_args=False)
        except TasksError as exc:
            if exc.code is ErrorCode.PERMISSION_DENIED and exc.reply is None:
                return False  # refused by the broker: nothing reached the endpoint
            raise
        return True

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        offered = self.offered.get(name)
        if offered is None:
            why = self.withheld.get(name, "there is no such tool")
            return ToolResult(
                error=TasksError(
                    ErrorCode.NOT_FOUND,
                    f"tool {name} is not available to this seat ({why}). Use the tools listed",
                    outcome="not-executed",
                )
            )
        spec = offered.spec
        try:
            data = await self.client.invoke(spec.command, dict(arguments or {}), mode=spec.mode)
        except TasksError as exc:
            return ToolResult(error=exc)
        return ToolResult(data=data)
