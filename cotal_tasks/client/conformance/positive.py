"""Section 6, checks 18 to 24: one task from creation to done, observed at every step,
and the same sequence on the versioned ``ep.v1`` rail.

The positive path runs once per run (the first of checks 18 to 24 runs it); each check
then judges its own step of that one run, so a provider that refuses every write fails
them all rather than passing by refusing.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.client.client import TasksClient
from cotal_tasks.client.conformance.context import (
    Context,
    Json,
    binding_triple,
    create,
    ensure,
    get,
    page,
    triple,
)
from cotal_tasks.client.wire import flush_queued
from cotal_tasks.core import BOARD_CHANGED_TOPIC

COMMIT_REF = "9f2c1e7 refs/heads/feat@{1}^~2 ✓ ünïcode"
RUN_REF = "run-41"
EVENT_WAIT_S = 0.5
_RUN = "positive-path"


@dataclass
class PositiveRun:
    """Everything observed running create → claim → blocked → evidence → done."""

    created: Json
    replies: dict[str, Json] = field(default_factory=dict)  # step -> reply envelope
    records: dict[str, Json] = field(default_factory=dict)  # step -> get-task data
    mine: dict[str, list[str]] = field(default_factory=dict)  # step -> my-tasks ids
    pages: list[Json] = field(default_factory=list)  # list-tasks after each step
    my_pages: list[Json] = field(default_factory=list)
    events: list[Json] = field(default_factory=list)  # board-changed envelopes
    raw_events: list[bytes] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)


async def positive_path(ctx: Context) -> PositiveRun:
    """The run, made once per context."""
    done = ctx.memo.get(_RUN)
    if isinstance(done, PositiveRun):
        return done
    queue: asyncio.Queue[Any] = asyncio.Queue()
    sub = await ctx.nc.subscribe(
        f"{ctx.prefix}.epe.{ctx.token}.*.*.{BOARD_CHANGED_TOPIC}", cb=queue.put
    )
    await flush_queued(ctx.nc)
    pages = [await page(ctx)]
    created = await create(
        ctx,
        "operator",
        "Ship the parser",
        brief="Ship it.",
        evidence=[{"kind": "run", "ref": RUN_REF}],
    )
    run = PositiveRun(created, pages=pages)
    task_id = created["taskId"]

    async def step(name: str, command: str, args: Json) -> None:
        run.replies[name] = await ctx.call("w", command, {"taskId": task_id, **args}, mode="self")
        run.records[name] = await get(ctx, task_id)
        run.pages.append(await page(ctx))
        mine: Json = await ctx.ok("w", "my-tasks", {}, mode="self")
        run.my_pages.append(mine)
        run.mine[name] = [t["taskId"] for t in mine["tasks"]]

    await step("claimed", "claim-task", {})
    await step("blocked", "update-task", {"status": "blocked", "note": "Waiting on review."})
    await step("evidence", "update-task", {"evidence": [{"kind": "commit", "ref": COMMIT_REF}]})
    await step("done", "update-task", {"status": "done", "note": "Merged."})
    await ctx.nc.flush()
    loop = asyncio.get_running_loop()
    until = loop.time() + EVENT_WAIT_S
    while (left := until - loop.time()) > 0:
        try:
            msg = await asyncio.wait_for(queue.get(), left)
        except TimeoutError:
            break
        run.subjects.append(msg.subject)
        run.raw_events.append(bytes(msg.data))
        run.events.append(json.loads(msg.data))
    await sub.unsubscribe()
    ctx.memo[_RUN] = run
    return run


def _succeeded(run: PositiveRun, step: str) -> None:
    reply = run.replies[step]
    error = reply.get("error") or {}
    ensure(
        reply.get("ok") is True,
        f"the {step} step was refused: {error.get('code')}: {error.get('message')}",
    )


def _kept_binding(run: PositiveRun, step: str) -> Json:
    """The record after ``step``, a status update: it succeeded, the task reads ``step``
    and the seat that claimed it is still bound."""
    _succeeded(run, step)
    record = run.records[step]
    ensure(record["status"] == step, f"the task reads {record['status']}, not {step}")
    ensure(
        record["binding"] == run.records["claimed"]["binding"],
        f"the binding changed at {step}",
    )
    return record


async def check_18(ctx: Context) -> str:
    run = await positive_path(ctx)
    _succeeded(run, "claimed")
    record = run.records["claimed"]
    ensure(record["taskId"] == run.created["taskId"], "get-task read another task")
    ensure(record["status"] == "claimed", f"the claimed task reads {record['status']}")
    ensure(
        binding_triple(record) == triple(ctx.seat("w")), f"the binding is {record.get('binding')}"
    )
    return "create, claim, get: the record reads claimed, bound to the caller triple"


async def check_19(ctx: Context) -> str:
    _kept_binding(await positive_path(ctx), "blocked")
    return "update-task to blocked with a note succeeds; the binding is intact"


async def check_20(ctx: Context) -> str:
    run = await positive_path(ctx)
    _succeeded(run, "evidence")
    before = run.records["blocked"]["evidence"]
    after = run.records["evidence"]["evidence"]
    runs = [e for e in before if e["kind"] == "run"]
    ensure(
        [(e["ref"], isinstance(e.get("addedAt"), int)) for e in runs] == [(RUN_REF, True)],
        f"the created run evidence reads {before}",
    )
    commits = [e for e in after if e["kind"] == "commit"]
    ensure(len(commits) == 1, f"{len(commits)} commit entries after adding one")
    ensure(commits[0]["ref"].encode() == COMMIT_REF.encode(), "the commit ref is not byte for byte")
    ensure(isinstance(commits[0]["addedAt"], int) and commits[0]["addedAt"] > 0, "no addedAt")
    ensure([e for e in after if e["kind"] != "commit"] == before, "other evidence was disturbed")
    ensure(run.records["evidence"]["binding"] == run.records["claimed"]["binding"], "binding moved")
    return "commit evidence round-trips byte for byte with addedAt; nothing else disturbed"


async def check_21(ctx: Context) -> str:
    run = await positive_path(ctx)
    record = _kept_binding(run, "done")
    ensure(record["evidence"] == run.records["evidence"]["evidence"], "evidence changed at done")
    return "update-task to done succeeds; the binding stays as the record of who finished"


async def check_22(ctx: Context) -> str:
    run = await positive_path(ctx)
    task_id = run.created["taskId"]
    ensure(task_id in run.mine["claimed"], "my-tasks misses the task while claimed")
    ensure(task_id in run.mine["done"], "my-tasks drops the task at done")
    status = next(t["status"] for t in run.my_pages[-1]["tasks"] if t["taskId"] == task_id)
    ensure(status == "done", f"my-tasks shows the finished task as {status}")
    return "my-tasks lists the task while claimed and still at done"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def check_23(ctx: Context) -> str:
    run = await positive_path(ctx)
    ensure(bool(run.events), "no board-changed event across checks 18 to 21")
    record = run.records["done"]
    forbidden = [record["taskId"], record["title"], "Ship", "open", "claimed", "blocked", "done"]
    seqs: list[int] = []
    for subject, event, body in zip(run.subjects, run.events, run.raw_events, strict=True):
        ensure(subject.endswith(f".{BOARD_CHANGED_TOPIC}"), f"an event on {subject}")
        ensure(event.get("v") == 1 and event.get("topic") == BOARD_CHANGED_TOPIC, f"event {event}")
        data = event.get("data")
        ensure(isinstance(data, dict) and set(data) == {"changeSeq", "observedAt"}, f"data {data}")
        assert isinstance(data, dict)
        ensure(
            all(isinstance(v, int) and not isinstance(v, bool) for v in data.values()), f"{data}"
        )
        seqs.append(data["changeSeq"])
        leaked = [
            t for t in forbidden if t in body.decode() or any(t in s for s in _strings(event))
        ]
        ensure(not leaked, f"an event body carries {leaked}")
    ensure(seqs == sorted(seqs), f"changeSeq goes back across events: {seqs}")
    return f"{len(run.events)} board-changed event(s), each carrying only changeSeq and observedAt"


async def check_24(ctx: Context) -> str:
    run = await positive_path(ctx)
    seqs = [p["changeSeq"] for p in run.pages]
    ensure(seqs == sorted(seqs), f"changeSeq decreases: {seqs}")
    ensure(seqs[-1] > seqs[0], f"changeSeq never advanced: {seqs}")
    for listed in (*run.pages, *run.my_pages):
        ensure(isinstance(listed.get("appliedLimit"), int) and listed["appliedLimit"] >= 1,
               "a page has no appliedLimit")  # fmt: skip
    return f"changeSeq never decreases ({seqs[0]} to {seqs[-1]}); every page has appliedLimit"


async def check_ep_v1(ctx: Context) -> str:
    """The same describe, create, claim, get sequence on the versioned rail: the client,
    given a generation, sends on ``ep.v1`` and accepts only replies on the ``ep.v1`` reply
    rail that carry that generation."""
    actor = ctx.actor("versioned")
    client = TasksClient(
        actor.nc, ctx.space, ctx.endpoint, actor.seat, name="conformance",
        timeout=ctx.timeout, generation=secrets.token_hex(16),
    )  # fmt: skip
    ensure(client.rail.plane == "ep.v1", f"the client sends on {client.rail.plane}")
    await client.describe()
    created = await client.invoke("create-task", {"title": "On the versioned rail"})
    claimed = await client.invoke("claim-task", {"taskId": created["taskId"]}, mode="self")
    read = await client.invoke("get-task", {"taskId": created["taskId"]})
    ensure(claimed["status"] == "claimed", "the ep.v1 claim did not bind")
    ensure(binding_triple(claimed) == triple(actor.seat), "the ep.v1 claim bound another seat")
    ensure(read == claimed, "get-task on ep.v1 differs from the claim")
    return (
        "describe, create, claim and get on ep.v1 are answered on the ep.v1 reply rail, "
        "generation kept"
    )
