"""The command service: the eight commands over any ``TaskStore``.

Transports (the Cotal wire, HTTP, the CLI) build a ``Call`` from what they
authenticated (the caller triple always comes from the transport, never from the
payload) and hand it to ``CommandService.handle``, which admits the mode, validates
the args, applies the contract's rule and commits through the store. A transport that
has admitted the mode and parsed the args itself hands the parsed input over
(``Call.admitted``), so a call's args are validated once on every path. A refusal before
any effect carries ``outcome: not-executed``; a store failure while committing
carries ``unknown``, because the database may have committed before it failed.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cotal_tasks.bridge.service.paging import decode_cursor, encode_cursor
from cotal_tasks.bridge.service.quota import SeatQuota
from cotal_tasks.bridge.service.validation import parse_args
from cotal_tasks.core import (
    COMMANDS,
    AdministerTaskInput,
    BindTaskInput,
    ClaimTaskInput,
    CommandSpec,
    ContractError,
    CreateTaskInput,
    ErrorCode,
    GetTaskInput,
    Input,
    ListTasksInput,
    Mode,
    MyTasksInput,
    Seat,
    Task,
    TaskStatus,
    UpdateTaskInput,
    administer_task,
    bind_task,
    canonical_json,
    claim_task,
    create_task,
    digest,
    update_task,
)
from cotal_tasks.core.commands import mode_refusal
from cotal_tasks.core.models import BRIEF_BYTES
from cotal_tasks.providers.store import (
    IdempotencyKey,
    IdempotencyKeyTaken,
    JsonReads,
    Page,
    PageQuery,
    RecordPage,
    RevisionConflict,
    StoredTask,
    TaskStore,
    Write,
)

log = logging.getLogger(__name__)
LIST_TASKS = "list-tasks"

DEFAULT_PAGE_CEILING = 100
DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000
DEFAULT_WRITES_PER_MINUTE = 120  # per seat: two a second, sustained
_CAS_ATTEMPTS = 16
PRUNE_EVERY_MS = 10 * 60 * 1000

Json = dict[str, Any]
ChangeListener = Callable[[int, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SeatPresence:
    """What a seat's presence card says: its lifecycle uid and raw environment value."""

    lifecycleUid: str | None
    environment: str | None
    fresh: bool


class PresenceSource(Protocol):
    """Reads a seat's presence card (the wire provides the real one)."""

    async def lookup(self, owner: str, actor: str) -> SeatPresence | None: ...


class NoPresence:
    """A presence source that knows no card: environments are recorded as absent."""

    async def lookup(self, owner: str, actor: str) -> SeatPresence | None:
        return None


@dataclass(slots=True)
class Call:
    """One command invocation, as the transport authenticated it; read-only by convention
    (not frozen: one is made for every request, and a frozen dataclass's ``__init__``
    costs several times as much)."""

    command: str
    caller: Seat
    envelope_id: str
    args: Mapping[str, Any] | None = None
    mode: Mode | None = None
    target: Seat | None = None
    # The args as a transport parsed them (``parse_args``) after admitting the mode; the
    # service then neither admits nor validates again.
    admitted: Input | None = None


@dataclass(slots=True)
class ServiceSettings:
    space: str
    page_ceiling: int = DEFAULT_PAGE_CEILING
    retention_ms: int = DEFAULT_RETENTION_MS
    require_presence: bool = False  # the optional reachability check of section 3
    writes_per_minute_per_seat: int = DEFAULT_WRITES_PER_MINUTE  # 0: no bound
    note_max_bytes: int = BRIEF_BYTES  # the contract's own bound unless lowered
    history_retention_ms: int | None = None  # None: history is kept for ever


def _new_task_id() -> str:
    return "t-" + secrets.token_hex(6)


@dataclass
class CommandService:
    store: TaskStore
    settings: ServiceSettings
    clock: Callable[[], int]
    presence: PresenceSource = field(default_factory=NoPresence)
    new_task_id: Callable[[], str] = _new_task_id
    # The store's stored wire form, where its build declares one (``Built.json_reads``):
    # read without rebuilding the models; the answer is the same.
    json_reads: JsonReads | None = None
    _listeners: list[ChangeListener] = field(default_factory=list)
    _last_prune: int = -PRUNE_EVERY_MS
    _quota: SeatQuota = field(init=False)

    def __post_init__(self) -> None:
        self._quota = SeatQuota(
            self.settings.writes_per_minute_per_seat, self.settings.note_max_bytes
        )

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener(changeSeq, observedAt)`` after every committed change."""
        self._listeners.append(listener)

    async def handle(self, call: Call) -> Json:
        """Serve one call; return the output's JSON form or raise ``ContractError``."""
        spec = COMMANDS.get(call.command)
        if spec is None:
            raise unknown_command(call.command).with_outcome("not-executed")
        try:
            args = call.admitted
            if args is None:
                _admit(spec, call)
                args = parse_args(spec, {} if call.args is None else call.args)
            return await self._dispatch(spec, call, args)
        except ContractError as exc:
            raise exc.with_outcome("not-executed") from None

    def answer_now(self, call: Call) -> Json | None:
        """The answer to an admitted read (``Call.admitted``) that the store holds ready
        (``JsonReads.held_json``), without waiting; ``None`` when it has to be served
        with ``handle``. The answer is the one ``handle`` gives, and is shared: never
        modify it."""
        args = call.admitted
        if type(args) is GetTaskInput and self.json_reads is not None:
            return self.json_reads.held_json(args.taskId)
        return None

    async def _dispatch(self, spec: CommandSpec, call: Call, args: Input) -> Json:
        if isinstance(args, ListTasksInput):
            return await self._page(spec.name, args.cursor, args.limit, args.status, None)
        if isinstance(args, MyTasksInput):
            return await self._page(spec.name, args.cursor, args.limit, None, call.caller)
        if isinstance(args, GetTaskInput):
            if self.json_reads is not None:
                return await self.json_reads.get_json(args.taskId)
            return (await self.store.get(args.taskId)).task.to_json()
        if call.mode == "self":  # a seat's own write: within its bounds before it costs
            self._quota.admit(call.caller.principal, getattr(args, "note", None), self.clock())
        if spec.idempotency == "envelope-id":
            return await self._idempotent(spec, call, args)
        return (await self._write(spec, call, args, None)).to_json()

    async def record_page(self, args: Mapping[str, Any]) -> Json:
        """The ``list-tasks`` page ``args`` ask for, each task as its full record (the
        dashboard's board feed): the same validation, ceiling, cursors, ``stale`` marker
        and refusals as ``list-tasks``; a cursor from one continues the other."""
        spec = COMMANDS[LIST_TASKS]
        try:
            parsed = parse_args(spec, args)
            assert isinstance(parsed, ListTasksInput)
            return await self._page(
                spec.name, parsed.cursor, parsed.limit, parsed.status, None, records=True
            )
        except ContractError as exc:
            raise exc.with_outcome("not-executed") from None

    async def _page(
        self,
        command: str,
        cursor: str | None,
        limit: int | None,
        statuses: tuple[TaskStatus, ...] | None,
        bound_to: Seat | None,
        *,
        records: bool = False,
    ) -> Json:
        """The one page builder: the ceiling, the cursor, ``changeSeq`` read before the
        page, ``stale`` after it; summaries, or full records for ``records``."""
        applied = min(limit or self.settings.page_ceiling, self.settings.page_ceiling)
        after = decode_cursor(cursor, command, statuses) if cursor is not None else None
        change_seq = await self.store.change_seq()
        observed_at = self.clock()
        query = PageQuery(
            limit=applied,
            after=after,
            statuses=frozenset(statuses) if statuses else None,
            bound_to=bound_to,
        )
        tasks, last, more = await self._read_page(query, records)
        stale = await self.store.freshness()
        # ``TaskPage.to_json()`` of the same values, without validating the records again.
        answer: Json = {"tasks": tasks, "appliedLimit": applied}
        if more and last is not None:
            answer["nextCursor"] = encode_cursor(last, command, statuses)
        answer["observedAt"] = observed_at
        answer["changeSeq"] = change_seq
        if stale is not None:
            answer["stale"] = stale.to_json()
        return answer

    async def _read_page(
        self, query: PageQuery, records: bool
    ) -> tuple[list[Any], int | None, bool]:
        """The page's tasks in their wire form, its last position, whether more follow."""
        fast = self.json_reads
        if fast is not None:
            stored = await (fast.page_records_json(query) if records else fast.page_json(query))
            return list(stored.tasks), stored.last, stored.more
        page: Page | RecordPage
        page = await (self.store.page_records(query) if records else self.store.page(query))
        return [task.to_json() for task in page.tasks], page.last, page.more

    async def _idempotent(self, spec: CommandSpec, call: Call, args: Input) -> Json:
        key = f"{call.caller}:{call.envelope_id}"
        args_digest = digest(
            canonical_json({"command": spec.name, "args": args.model_dump(mode="json")})
        )
        for _ in range(2):
            replay = await self._recall(key, spec.name, args_digest, call.envelope_id)
            if replay is not None:
                return replay
            try:
                committed = await self._write(spec, call, args, (key, args_digest))
            except IdempotencyKeyTaken:
                continue  # a concurrent twin won: answer with its result
            return committed.to_json()
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"envelope id {call.envelope_id!r} is being recorded by a concurrent request. Retry",
        )

    async def _recall(self, key: str, command: str, args_digest: str, env_id: str) -> Json | None:
        not_before = self.clock() - self.settings.retention_ms
        record = await self.store.recall(key, not_before)
        if record is None:
            return None
        if record.command != command or record.args_digest != args_digest:
            raise ContractError(
                ErrorCode.CONFLICT,
                f"envelope id {env_id!r} was already used for a different {record.command} "
                "request. Send a new request with a fresh id",
            )
        result: Json = json.loads(record.result)
        if "version" in result:
            return result  # the whole record, as results were recorded before references
        # The task the write made, read now: the same record while nothing has written it
        # since; after a later write, the task as it is (the replay has no second effect).
        task_id = str(result["taskId"])
        if self.json_reads is not None:
            return await self.json_reads.get_json(task_id)
        return (await self.store.get(task_id)).task.to_json()

    async def _write(
        self, spec: CommandSpec, call: Call, args: Input, remember: tuple[str, str] | None
    ) -> Task:
        environment = await self._environment(spec, call)
        for _ in range(_CAS_ATTEMPTS):
            now = self.clock()
            task_id = getattr(args, "taskId", None)
            current = None if task_id is None else await self.store.get(task_id)
            task = self._apply(call, args, current, environment, now)
            if current is not None and task is current.task:
                return task  # nothing to change: no write, no changeSeq
            write = Write(
                task=task,
                expected_revision=None if current is None else current.revision,
                command=spec.name,
                actor=str(call.caller),
                note=getattr(args, "note", None),
                idempotency=None
                if remember is None
                else IdempotencyKey(
                    remember[0],
                    spec.name,
                    remember[1],
                    expired_before=now - self.settings.retention_ms,
                ),
            )
            try:
                committed = await self.store.commit(write)
            except RevisionConflict:
                continue  # someone else wrote first: re-read and re-apply the rule
            except ContractError as exc:
                raise exc.with_outcome("unknown") from None
            await self.announce(committed.change_seq)
            await self._prune_now_and_then(now)
            return committed.task
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            "the task changed under this request too many times in a row. Retry",
        )

    def _apply(
        self, call: Call, args: Input, current: StoredTask | None, environment: str | None, now: int
    ) -> Task:
        if isinstance(args, CreateTaskInput):
            return create_task(args, task_id=self.new_task_id(), space=self.settings.space, now=now)
        assert current is not None
        task = current.task
        if isinstance(args, ClaimTaskInput):
            return claim_task(task, call.caller, environment=environment, now=now)
        if isinstance(args, BindTaskInput):
            assert call.target is not None
            return bind_task(
                task,
                call.target,
                args,
                bound_by=call.caller.principal,
                environment=environment,
                now=now,
            )
        if isinstance(args, UpdateTaskInput):
            return update_task(task, call.caller, args, now=now)
        if isinstance(args, AdministerTaskInput):
            return administer_task(task, args, now=now)
        raise AssertionError(f"no rule for {type(args).__name__}")

    async def _environment(self, spec: CommandSpec, call: Call) -> str | None:
        """The bound seat's raw environment value, and the optional reachability check."""
        if spec.name not in ("claim-task", "bind-task"):
            return None
        seat = call.target if spec.name == "bind-task" else call.caller
        assert seat is not None
        card = await self.presence.lookup(seat.owner, seat.actor)
        current = card is not None and card.fresh and card.lifecycleUid == seat.lifecycleUid
        if self.settings.require_presence and not current:
            raise ContractError(
                ErrorCode.FAILED_PRECONDITION,
                f"seat {seat} has no fresh presence card with that lifecycle uid. Check the "
                "triple (a typo binds to nothing), or start the seat and retry",
            )
        return card.environment if current and card is not None else None

    async def _prune_now_and_then(self, now: int) -> None:
        """Forget expired idempotency results (and history past its retention), at most
        once per ``PRUNE_EVERY_MS``."""
        if now - self._last_prune < PRUNE_EVERY_MS:
            return
        self._last_prune = now
        try:
            history = self.settings.history_retention_ms
            await self.store.prune(
                before=now - self.settings.retention_ms,
                history_before=None if history is None else now - history,
            )
        except ContractError:
            log.warning("pruning idempotency results failed; will retry later", exc_info=True)

    async def announce(self, change_seq: int) -> None:
        """Tell the listeners about a committed change (the sync calls this for its own)."""
        observed_at = self.clock()
        for listener in self._listeners:
            try:
                await listener(change_seq, observed_at)
            except Exception:  # a listener must never undo a committed write
                log.exception("change listener failed for changeSeq %d", change_seq)


def unknown_command(command: str) -> ContractError:
    """The refusal of a command the contract does not have (every transport's)."""
    return ContractError(
        ErrorCode.UNIMPLEMENTED,
        f"this endpoint serves no command {command!r}. Describe lists the eight "
        "ai.cotal.tasks commands it serves",
    )


def _admit(spec: CommandSpec, call: Call) -> None:
    """Mode admission per the command table, before anything runs."""
    refusal = mode_refusal(
        spec.name,
        spec.modes,
        call.mode,
        target_given=call.target is not None,
        target_is_caller=call.target == call.caller,
    )
    if refusal is not None:
        raise ContractError(refusal.code, refusal.message)
