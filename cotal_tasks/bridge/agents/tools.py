"""The seat's tools for a coding agent: which commands it may use, and calling them.

An agent gets ``my_tasks``, ``get_task``, ``claim_task`` and ``update_task``, and
``list_tasks`` and ``create_task`` besides, each only where its seat holds the grant. That
is asked, never guessed: describe must show the command to the seat, and the broker must
carry a probe of it. The probe is harmless and quiet: a cast (``replyExpected: false``)
of empty args, which the endpoint answers to nobody and leaves out of its log, and whose
empty args every write refuses before anything runs (``TasksClient.carries``). A publish
the broker refuses means the seat lacks the grant, and the tool is left out. Every tool
acts as the seat and only the seat: the targeted ones are sent at mode ``self``, and no
tool takes a seat or target argument (the input schemas, which are the contract's own, are
closed).

Text keeps its lines for the agent: a brief or note it sends may carry line breaks, sent
as the contract's line and paragraph separators, and a tool's text answer shows them as
line breaks again (``lines_kept`` and ``line_breaks``; the structured answer stays the
contract's record).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.client import CommandContract, ErrorCode, Mode, TasksClient, TasksError
from cotal_tasks.core import line_breaks, lines_kept

# The inputs that are a person's or an agent's prose, where line breaks are kept.
_PROSE = ("brief", "note")


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
        "evidence (kind commit, branch, run or review, with its ref) or a new brief (a note and "
        "a brief keep their line breaks). Record "
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
        return json.dumps(_read(self.data), ensure_ascii=False)


def _read(value: Any) -> Any:
    """``value`` with the contract's line and paragraph separators as line breaks."""
    if isinstance(value, str):
        return line_breaks(value)
    if isinstance(value, Mapping):
        return {key: _read(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_read(item) for item in value]
    return value


def _written(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's arguments with the line breaks of its prose as the contract carries them."""
    args = dict(arguments or {})
    for name in _PROSE:
        if isinstance(args.get(name), str):
            args[name] = lines_kept(args[name])
    return args


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
        return await self.client.carries(spec.command, mode=spec.mode)

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
            data = await self.client.invoke(spec.command, _written(arguments), mode=spec.mode)
        except TasksError as exc:
            return ToolResult(error=exc)
        return ToolResult(data=data)
