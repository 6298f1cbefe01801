"""A bridge killed with SIGKILL during a write storm loses no acknowledged write.

The bridge runs as its own process (``cotal-tasks serve``) on a real nats-server, on
SQLite and on PostgreSQL. Twenty writers, each its own seat, create a task (pinned
envelope id), claim it and mark it done (pinned envelope id), over and over; once enough
writes are acknowledged the process is killed with SIGKILL, mid-storm. A writer whose
call goes unanswered stops there (its outcome is unknown). Restarted on the same board:

- every acknowledged write is there: each task reads back exactly as its last
  acknowledged answer said, unless a later write of it was in flight at the kill;
- every task keeps the status-binding invariant, and ``changeSeq`` counts every change;
- replaying an acknowledged id-idempotent write returns the stored result, and replaying
  one that was in flight settles it without a second task.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotal_tasks.core import Task
from cotal_tasks.core.rules import check_invariant
from tests.conftest import BACKENDS, seat
from tests.support.bridge import ENDPOINT, SPACE, broker, client, set_up_space
from tests.support.cli import CLI
from tests.support.cotal import TestCaller, nonce
from tests.support.paging import follow_cursor, tasks_of
from tests.support.polling import eventually

Json = dict[str, Any]
WRITERS = 20
KILL_AFTER = 60  # acknowledged writes before the kill
WAIT_S = 3.0  # a call unanswered this long counts as in flight at the kill


@dataclass
class Sent:
    """One write a writer sent, and its answer if it had one before the kill."""

    caller: TestCaller
    command: str
    args: Json
    request_id: str | None
    task_id: str | None
    answer: Json | None = None


@dataclass
class Storm:
    sent: list[Sent] = field(default_factory=list)
    acked: int = 0
    kill: asyncio.Event = field(default_factory=asyncio.Event)


async def call(
    caller: TestCaller, command: str, args: Json, request_id: str | None, mode: str | None
) -> Json | None:
    """The reply envelope, or ``None`` when nothing answered within ``WAIT_S``."""
    request_nonce = nonce()
    body = caller.envelope(command, args=args, request_id=request_id)
    got = await caller.exchange(
        caller.subject(command, request_nonce, mode=mode),
        orjson.dumps(body),
        request_nonce,
        wait=WAIT_S,
    )
    return None if got is None else got[1]


async def writer(caller: TestCaller, w: int, storm: Storm) -> None:
    job = 0
    while True:
        task_id: str | None = None
        steps: list[tuple[str, str | None, str | None]] = [
            ("create-task", f"create-{w}-{job}", None),
            ("claim-task", None, "self"),
            ("update-task", f"done-{w}-{job}", "self"),
        ]
        for command, request_id, mode in steps:
            args: Json = {"title": f"writer {w} job {job}"}
            if command == "claim-task":
                args = {"taskId": task_id}
            elif command == "update-task":
                args = {"taskId": task_id, "status": "done", "note": f"job {job} finished"}
            sent = Sent(caller, command, args, request_id, task_id)
            storm.sent.append(sent)
            reply = await call(caller, command, args, request_id, mode)
            if reply is None:
                return  # in flight at the kill: the outcome is unknown
            assert reply["ok"], reply
            sent.answer = reply["data"]
            task_id = sent.task_id = reply["data"]["taskId"]
            storm.acked += 1
            if storm.acked >= KILL_AFTER:
                storm.kill.set()
        job += 1


@asynccontextmanager
async def bridge_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        str(CLI),
        "serve",
        "--config",
        str(config),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def described(callers: list[TestCaller]) -> None:
    """Describe (and bind to) the endpoint once it answers; it may still be starting."""

    async def answers() -> bool:
        try:
            await callers[0].describe()
        except AssertionError:
            return False
        return True

    await eventually(answers, 120, what="the endpoint answers describe", every=0.2)
    await asyncio.gather(*(c.describe() for c in callers[1:]))


def config_file(tmp: Path, nats_url: str, database: str) -> Path:
    path = tmp / "bridge.toml"
    path.write_text(
        f'space = "{SPACE}"\nnats_url = "{nats_url}"\ndata_dir = "{tmp / "data"}"\n'
        f'[http]\nport = 0\n[[endpoints]]\nname = "{ENDPOINT}"\ndatabase = "{database}"\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(params=BACKENDS)
def crash_board(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'board.db'}"
    database: str = request.getfixturevalue("postgres_database")
    return database


@pytest.mark.timeout(120)
async def test_sigkill_during_a_write_storm_loses_no_acknowledged_write(
    tmp_path: Path, crash_board: str
) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        nc = await client(server.url)
        config = config_file(tmp_path, server.url, crash_board)
        callers = [TestCaller(nc, SPACE, ENDPOINT, seat(f"w{w}", w)) for w in range(WRITERS)]
        storm = Storm()
        try:
            async with bridge_process(config) as first:
                await described(callers)
                writers = [asyncio.create_task(writer(c, w, storm)) for w, c in enumerate(callers)]
                await asyncio.wait_for(storm.kill.wait(), 60)
                os.kill(first.pid, signal.SIGKILL)
                await first.wait()
                await asyncio.wait_for(asyncio.gather(*writers), 30)
            assert first.returncode == -signal.SIGKILL
            assert storm.acked >= KILL_AFTER
            async with bridge_process(config):
                await described(callers)
                await check_board(storm, callers[0])
        finally:
            await nc.close()


async def check_board(storm: Storm, reader: TestCaller) -> None:
    acked = [s for s in storm.sent if s.answer is not None]
    in_flight = [s for s in storm.sent if s.answer is None]
    assert in_flight, "the kill came after every writer had stopped"
    # Every acknowledged write is there: a task reads as its last acknowledged answer...
    last: dict[str, Json] = {}
    for sent in acked:
        assert sent.answer is not None
        assert sent.task_id is not None
        last[sent.task_id] = sent.answer
    unsettled = {s.task_id for s in in_flight if s.task_id is not None}
    for task_id, answer in last.items():
        now = await reader.ok("get-task", {"taskId": task_id})
        if task_id not in unsettled:
            assert now == answer
        else:  # ...or as the write in flight at the kill left it
            assert now["title"] == answer["title"]
            assert now["updatedAt"] >= answer["updatedAt"]
    # Replays: an acknowledged write answers the task it made, as it now is (a later write
    # may have moved it on), and changes nothing; one in flight settles once.
    for sent in acked + in_flight:
        if sent.request_id is None:
            continue
        reply = await call(sent.caller, sent.command, sent.args, sent.request_id, _mode(sent))
        assert reply is not None
        assert reply["ok"], reply
        if sent.answer is not None:
            assert reply["data"]["taskId"] == sent.answer["taskId"]
            assert reply["data"]["updatedAt"] >= sent.answer["updatedAt"]
    # Every task keeps the invariant; each job made one task; changeSeq counts every change.
    tasks = await all_tasks(reader)
    titles = [t["title"] for t in tasks]
    assert len(titles) == len(set(titles))
    for summary in tasks:
        full = await reader.ok("get-task", {"taskId": summary["taskId"]})
        check_invariant(Task.model_validate(full))
    changes = sum(
        {"open": 1, "claimed": 2, "done": 3}[t["status"]] for t in tasks
    )  # create, claim and done are one change each
    page = await reader.ok("list-tasks", {"limit": 1})
    assert page["changeSeq"] == changes


def _mode(sent: Sent) -> str | None:
    return None if sent.command == "create-task" else "self"


async def all_tasks(reader: TestCaller) -> list[Json]:
    return tasks_of(await follow_cursor(lambda args: reader.ok("list-tasks", args), {"limit": 100}))
