"""``TasksClient``: the typed client of the ``ai.cotal.tasks`` contract.

One method per command, taking and returning the contract's own models (``Task``,
``TaskPage``); the untyped ``invoke``/``invoke_answer`` and ``describe`` come from
``Session``. Every write takes an optional ``envelope_id``: a caller that retries a
write after losing the answer passes the same id again, and the endpoint applies it once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeVar

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from pydantic import BaseModel, ValidationError

from cotal_tasks.client.errors import TasksError, usage_error
from cotal_tasks.client.events import BoardWatch
from cotal_tasks.client.refusals import validation_message
from cotal_tasks.client.session import Session, as_seat
from cotal_tasks.client.subjects import board_changed_filter, seat_inbox
from cotal_tasks.core import (
    AdministerTaskInput,
    BindingRef,
    BindTaskInput,
    ClaimTaskInput,
    CreateTaskInput,
    ErrorCode,
    EvidenceInput,
    GetTaskInput,
    Input,
    ListTasksInput,
    MyTasksInput,
    Seat,
    Task,
    TaskPage,
    TaskStatus,
    TaskSummary,
    UpdateTaskInput,
)
from cotal_tasks.core.commands import Mode
from cotal_tasks.core.masking import mask_credentials

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
Evidence = Iterable[EvidenceInput | Mapping[str, str]]
CreateStatus = Literal["open", "done", "dropped"]
UpdateStatus = Literal["claimed", "blocked", "done", "dropped"]
CONNECT_ATTEMPTS = 3
# Between two of the first attempts to connect: a broker still starting is caught, a
# broker that is down is reported within a couple of seconds. Once connected, the
# client waits ``RECONNECT_WAIT_S`` between attempts to reconnect (nats-py's default).
CONNECT_WAIT_S = 0.5
RECONNECT_WAIT_S = 2.0


class _Unchecked(Enum):
    UNCHECKED = "unchecked"


UNCHECKED = _Unchecked.UNCHECKED  # bind-task without an expectedBinding check


def _args(command: str, model: type[Input], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``fields`` as the command's input; only the fields given are sent."""
    try:
        value = model.model_validate(fields)
    except ValidationError as exc:
        raise usage_error(validation_message(command, exc)) from exc
    return value.model_dump(mode="json", exclude_unset=True)


def _given(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _result(command: str, model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise TasksError(
            ErrorCode.CONTRACT_MISMATCH,
            f"the {command} result fits the endpoint's schema but not this client's "
            f"{model.__name__} model; the command ran. Upgrade the client or the endpoint",
            outcome="executed",
        ) from exc


def _evidence(evidence: Evidence | None) -> list[Any] | None:
    if evidence is None:
        return None
    return [e.to_json() if isinstance(e, EvidenceInput) else dict(e) for e in evidence]


async def _log_nats_error(exc: Exception) -> None:
    log.warning("nats: %s", mask_credentials(str(exc)))


class TasksClient(Session):
    """A caller seat's typed client of one ``ai.cotal.tasks`` endpoint.

    ``TasksClient(nc, space, endpoint, seat)`` works over a connection the caller owns;
    ``async with TasksClient.connect(url, space, endpoint, seat=…) as client`` opens and
    closes its own. Nothing is sent until the first call, which describes the endpoint.
    """

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        nats_url: str,
        space: str,
        endpoint: str,
        *,
        seat: Seat | str,
        creds: str | Path | None = None,
        name: str = "cotal-tasks-client",
        timeout: float = 10.0,  # noqa: ASYNC109  (the wire deadline, deadlineMs)
        retries: int = 1,
        **options: Any,
    ) -> AsyncIterator[TasksClient]:
        """Connect to ``nats_url`` (with the seat's ``creds`` file on an auth mesh).

        ``options`` go to ``nats.connect``. Connecting gives up after a few attempts;
        once connected, the client reconnects for as long as it is open. The connection's
        inbox prefix is the seat's own (``seat_inbox``), the one its grants let it read;
        a connection the caller opens itself must use it too.
        """
        caller = as_seat(seat)
        nc = NATS()

        async def log_error(exc: Exception) -> None:
            # The first connection's failures are the one error raised below; a lost
            # connection's are logged as they come.
            if nc.is_connected or nc.is_reconnecting:
                await _log_nats_error(exc)

        try:
            await nc.connect(
                nats_url,
                name=name,
                user_credentials=None if creds is None else str(creds),
                **{
                    "error_cb": log_error,
                    "allow_reconnect": True,
                    "max_reconnect_attempts": CONNECT_ATTEMPTS,
                    "reconnect_time_wait": CONNECT_WAIT_S,
                    "connect_timeout": timeout,
                    "inbox_prefix": seat_inbox(caller),
                    **options,
                },
            )
        except (NatsError, OSError) as exc:
            raise TasksError(
                ErrorCode.UNAVAILABLE,
                f"cannot connect to {mask_credentials(nats_url)} ({type(exc).__name__}: "
                f"{mask_credentials(str(exc))}). Check that the broker runs at that URL "
                "and the credentials",
                outcome="not-executed",
            ) from exc
        if "max_reconnect_attempts" not in options:
            # A few tries to connect at all; once connected, reconnect for as long as the
            # client lives (a long agent session outlasts a broker restart).
            nc.options["max_reconnect_attempts"] = -1
        if "reconnect_time_wait" not in options:
            nc.options["reconnect_time_wait"] = RECONNECT_WAIT_S
        try:
            yield cls(nc, space, endpoint, caller, name=name, timeout=timeout, retries=retries)
        finally:
            await nc.close()

    # -- reads ----------------------------------------------------------------------------
    async def list_tasks(
        self,
        *,
        status: TaskStatus | Iterable[TaskStatus] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> TaskPage:
        """One page of the board (``list-tasks``), in its stable order."""
        statuses = [status] if isinstance(status, str) else status
        fields = _given(status=None if statuses is None else list(statuses), limit=limit)
        args = _args("list-tasks", ListTasksInput, {**fields, **_given(cursor=cursor)})
        return _result("list-tasks", TaskPage, await self.invoke("list-tasks", args))

    async def my_tasks(self, *, limit: int | None = None, cursor: str | None = None) -> TaskPage:
        """One page of the tasks bound to this seat (``my-tasks``, mode self)."""
        args = _args("my-tasks", MyTasksInput, _given(limit=limit, cursor=cursor))
        return _result("my-tasks", TaskPage, await self.invoke("my-tasks", args, mode="self"))

    async def iter_pages(
        self,
        *,
        status: TaskStatus | Iterable[TaskStatus] | None = None,
        limit: int | None = None,
        mine: bool = False,
    ) -> AsyncIterator[TaskPage]:
        """Every page of ``list-tasks`` (``my-tasks`` when ``mine``), following ``nextCursor``."""
        statuses = None if status is None else [status] if isinstance(status, str) else [*status]
        cursor: str | None = None
        while True:
            if mine:
                page = await self.my_tasks(limit=limit, cursor=cursor)
            else:
                page = await self.list_tasks(status=statuses, limit=limit, cursor=cursor)
            yield page
            if page.nextCursor is None:
                return
            cursor = page.nextCursor

    async def iter_tasks(
        self,
        *,
        status: TaskStatus | Iterable[TaskStatus] | None = None,
        limit: int | None = None,
        mine: bool = False,
    ) -> AsyncIterator[TaskSummary]:
        """Every task of every page, in the board's order (``limit`` is the page size)."""
        async for page in self.iter_pages(status=status, limit=limit, mine=mine):
            for task in page.tasks:
                yield task

    async def get_task(self, task_id: str) -> Task:
        """The whole record of one task, brief and evidence included."""
        args = _args("get-task", GetTaskInput, {"taskId": task_id})
        return _result("get-task", Task, await self.invoke("get-task", args))

    # -- writes ---------------------------------------------------------------------------
    async def create_task(
        self,
        title: str,
        *,
        brief: str | None = None,
        status: CreateStatus | None = None,
        evidence: Evidence | None = None,
        envelope_id: str | None = None,
    ) -> Task:
        """Create an unbound task (open unless ``status`` says done or dropped)."""
        fields = _given(title=title, brief=brief, status=status, evidence=_evidence(evidence))
        args = _args("create-task", CreateTaskInput, fields)
        return await self._write("create-task", args, envelope_id)

    async def bind_task(
        self,
        task_id: str,
        target: Seat | str,
        *,
        expected_binding: BindingRef | Seat | _Unchecked | None = UNCHECKED,
        mode: Mode | None = None,
        envelope_id: str | None = None,
    ) -> Task:
        """Bind a task to the ``target`` seat (mode owner for a seat of this caller's
        owner, any otherwise). ``expected_binding`` checks the current binding first:
        ``None`` asserts the task is unbound."""
        fields: dict[str, Any] = {"taskId": task_id}
        if isinstance(expected_binding, Seat):
            expected_binding = BindingRef(
                owner=expected_binding.owner,
                actor=expected_binding.actor,
                lifecycleUid=expected_binding.lifecycleUid,
            )
        if expected_binding is not UNCHECKED:
            fields["expectedBinding"] = (
                None if expected_binding is None else expected_binding.to_json()
            )
        args = _args("bind-task", BindTaskInput, fields)
        return await self._write("bind-task", args, envelope_id, target=target, mode=mode)

    async def claim_task(self, task_id: str, *, envelope_id: str | None = None) -> Task:
        """Bind an open task to this seat (repeating it returns the same record)."""
        args = _args("claim-task", ClaimTaskInput, {"taskId": task_id})
        return await self._write("claim-task", args, envelope_id, mode="self")

    async def update_task(
        self,
        task_id: str,
        *,
        status: UpdateStatus | None = None,
        note: str | None = None,
        evidence: Evidence | None = None,
        brief: str | None = None,
        envelope_id: str | None = None,
    ) -> Task:
        """Move a task bound to this seat, add evidence, a note or a new brief."""
        fields = _given(
            taskId=task_id, status=status, note=note, brief=brief, evidence=_evidence(evidence)
        )
        args = _args("update-task", UpdateTaskInput, fields)
        return await self._write("update-task", args, envelope_id, mode="self")

    async def administer_task(
        self,
        task_id: str,
        *,
        status: TaskStatus | None = None,
        unbind: bool = False,
        note: str | None = None,
        envelope_id: str | None = None,
    ) -> Task:
        """An operator's override: set any status, or unbind (``tasks.admin``)."""
        fields = _given(taskId=task_id, status=status, note=note, unbind=unbind or None)
        args = _args("administer-task", AdministerTaskInput, fields)
        return await self._write("administer-task", args, envelope_id)

    async def _write(
        self,
        command: str,
        args: dict[str, Any],
        envelope_id: str | None,
        *,
        target: Seat | str | None = None,
        mode: Mode | None = None,
    ) -> Task:
        data = await self.invoke(command, args, target=target, mode=mode, envelope_id=envelope_id)
        return _result(command, Task, data)

    # -- events ---------------------------------------------------------------------------
    def watch_board(self) -> BoardWatch:
        """``board-changed`` events as an async iterator (see ``BoardWatch``).

        The event data is checked against the schema the endpoint published once it has
        been described; describe first (``await client.describe()``) to have it checked.
        """
        service = self.resolved
        return BoardWatch(
            self.nc,
            board_changed_filter(self.space, self._token),
            None if service is None else service.event,
        )
