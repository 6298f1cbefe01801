"""Section 6, checks 1 to 8: describe, the reads, and the self-mode writes of one seat."""

from __future__ import annotations

from typing import Any

from nats.aio.msg import Msg

from cotal_tasks.client.conformance.context import (
    Context,
    Failed,
    Json,
    Skipped,
    binding_triple,
    claim,
    create,
    ensure,
    get,
    my_ids,
    page,
    triple,
)
from cotal_tasks.client.conformance.raw import raw_call
from cotal_tasks.client.errors import TasksError
from cotal_tasks.core import CLUSTER_URN

# Section 1's command table: capability and targeting shape per command.
CONTRACT_TABLE: dict[str, tuple[str, str]] = {
    "list-tasks": ("tasks.read", "untargeted"),
    "get-task": ("tasks.read", "untargeted"),
    "my-tasks": ("tasks.self", "targeted, mode self"),
    "create-task": ("tasks.write", "untargeted"),
    "bind-task": ("tasks.bind", "targeted, modes owner and any"),
    "claim-task": ("tasks.self", "targeted, mode self"),
    "update-task": ("tasks.self", "targeted, mode self"),
    "administer-task": ("tasks.admin", "untargeted"),
}
ABSENT_TASK = "t-absent000000"


async def check_01(ctx: Context) -> str:
    service = await ctx.client("reader").describe()
    ensure(service.endpoint == ctx.endpoint, f"describe names endpoint {service.endpoint}")
    ensure(service.urn == CLUSTER_URN, f"the cluster is {service.urn}, not {CLUSTER_URN}")
    ensure(service.revision == 1, f"the cluster is at revision {service.revision}, not 1")
    described = {n: (r.capability, r.targeting()) for n, r in service.commands.items()}
    missing = sorted(set(CONTRACT_TABLE) - set(described))
    ensure(not missing, f"describe lists no {', '.join(missing)}")
    wrong = {n: described[n] for n in CONTRACT_TABLE if described[n] != CONTRACT_TABLE[n]}
    ensure(not wrong, f"capability or targeting differs from section 1: {wrong}")
    return (
        f"describe lists the eight commands of {service.urn} revision {service.revision}, "
        "capabilities and targeting as section 1 gives them (contract verified from EPC)"
    )


async def check_02(ctx: Context) -> str:
    data = await page(ctx)
    for key in ("observedAt", "changeSeq", "appliedLimit"):
        value = data.get(key)
        ensure(isinstance(value, int) and not isinstance(value, bool), f"{key} is {value!r}")
    ensure(data["changeSeq"] >= 0, f"changeSeq is {data['changeSeq']}")
    ensure(data["appliedLimit"] >= 1, f"appliedLimit is {data['appliedLimit']}")
    ensure("stale" not in data, f"a healthy read carries stale: {data.get('stale')}")
    if data["tasks"]:
        raise Skipped(
            f"the page is well formed, but the board holds tasks ({len(data['tasks'])} on the "
            "first page); the tasks: [] half needs an empty board"
        )
    ensure("nextCursor" not in data, "an empty board's page has a nextCursor")
    return (
        f"tasks: [] with observedAt, changeSeq {data['changeSeq']} and appliedLimit "
        f"{data['appliedLimit']}, no stale marker"
    )


async def check_03(ctx: Context) -> str:
    hooks = ctx.hooks
    if hooks.spoil_store is None and not hooks.store_unreadable:
        raise Skipped(
            "needs an operator's hand: make the endpoint's store unreadable, then run this "
            "check alone with --store-unreadable"
        )
    if hooks.spoil_store is not None:
        await create(ctx, "reader", "A task that must not vanish into an empty page")
        ensure(len((await page(ctx))["tasks"]) >= 1, "the created task is not listed")
        await hooks.spoil_store()
    seen = []
    for command, mode in (("list-tasks", None), ("my-tasks", "self")):
        code, outcome = await ctx.refused("worker" if mode else "reader", command, {}, mode=mode)
        ensure(code == "unavailable", f"{command} on an unreadable store answered {code}")
        ensure(outcome in ("executed", "not-executed", "unknown"), f"outcome {outcome!r}")
        seen.append(f"{command}: unavailable")
    return "with the store unreadable, " + ", ".join(seen) + " (never an empty page)"


async def check_04(ctx: Context) -> str:
    await create(ctx, "reader", "Something present")
    code, _ = await ctx.refused("reader", "get-task", {"taskId": ABSENT_TASK})
    ensure(code == "not-found", f"get-task of an absent task answered {code}")
    return "get-task of an absent task is not-found"


async def check_05(ctx: Context) -> str:
    mine = await create(ctx, "operator", "Mine")
    theirs = await create(ctx, "operator", "Theirs")
    unbound = await create(ctx, "operator", "Nobody's")
    await claim(ctx, "me", mine["taskId"])
    await claim(ctx, "other", theirs["taskId"])
    for who, own, foreign in (("me", mine, theirs), ("other", theirs, mine)):
        ids = await my_ids(ctx, who)
        ensure(own["taskId"] in ids, f"my-tasks of {who} does not list its own task")
        ensure(foreign["taskId"] not in ids, f"my-tasks of {who} lists another seat's task")
        ensure(unbound["taskId"] not in ids, f"my-tasks of {who} lists an unbound task")
    # Without a mode the client refuses, before anything is published...
    spied: list[Msg] = []

    async def spy(msg: Msg) -> None:
        spied.append(msg)

    rails = [
        f"{ctx.prefix}.ep.*.{ctx.token}.my-tasks.>",
        f"{ctx.prefix}.ep.v1.*.{ctx.token}.my-tasks.>",
    ]
    subs = [await ctx.nc.subscribe(rail, cb=spy) for rail in rails]
    try:
        await ctx.nc.flush()
        try:
            await ctx.client("me").invoke_answer("my-tasks", {})
        except TasksError as exc:
            ensure(
                (exc.code.value, exc.outcome) == ("bad-request", "not-executed"),
                f"the client refused my-tasks without a mode as {exc.code.value}/{exc.outcome}",
            )
        else:
            raise Failed("the client sent my-tasks without a mode")
        await ctx.nc.flush()
        ensure(spied == [], f"the refused my-tasks was published: {[m.subject for m in spied]}")
    finally:
        for sub in subs:
            await sub.unsubscribe()
    # ...and the endpoint itself refuses an untargeted my-tasks sent by hand.
    reply = await raw_call(ctx, "me", "my-tasks", {})
    error: Any = reply.get("error") or {}
    ensure(reply.get("ok") is False, "the endpoint answered an untargeted my-tasks")
    ensure(
        error.get("outcome") == "not-executed", f"the refusal's outcome is {error.get('outcome')}"
    )
    return (
        "my-tasks --self lists the seat's own tasks only; without a mode the client refuses "
        f"(bad-request, nothing published) and the endpoint refuses a hand-sent one "
        f"({error.get('code')})"
    )


async def check_06(ctx: Context) -> str:
    task = await create(ctx, "operator", "Claim me")
    before = (await page(ctx))["changeSeq"]
    worker = ctx.seat("worker")
    first = await claim(ctx, "worker", task["taskId"])
    ensure(first["status"] == "claimed", f"claim-task answered status {first['status']}")
    ensure(binding_triple(first) == triple(worker), f"the binding is {first.get('binding')}")
    ensure(first["binding"].get("boundBy") == worker.principal, "boundBy is not the caller")
    after_first = (await page(ctx))["changeSeq"]
    ensure(after_first > before, "changeSeq did not advance on the claim")
    second = await claim(ctx, "worker", task["taskId"])
    ensure(second == first, "a repeated claim returned another record")
    ensure((await page(ctx))["changeSeq"] == after_first, "a repeated claim changed the board")
    ensure(await get(ctx, task["taskId"]) == first, "get-task differs from the claim's record")
    return "claim-task binds the caller triple; the same claim again returns the same record"


async def check_07(ctx: Context) -> str:
    task = await create(ctx, "operator", "Contested")
    held = await claim(ctx, "holder", task["taskId"])
    code, _ = await ctx.refused("late", "claim-task", {"taskId": task["taskId"]}, mode="self")
    ensure(code == "conflict", f"claiming another seat's task answered {code}")
    ensure(await get(ctx, task["taskId"]) == held, "the refused claim changed the record")
    return "claim-task of a task bound to another seat is conflict; the record is unchanged"


async def check_08(ctx: Context) -> str:
    task = await create(ctx, "operator", "Not yours")
    held = await claim(ctx, "holder", task["taskId"])
    args: Json = {
        "taskId": task["taskId"],
        "status": "done",
        "brief": "Taken over",
        "evidence": [{"kind": "commit", "ref": "deadbeef"}],
        "note": "mine now",
    }
    code, _ = await ctx.refused("intruder", "update-task", args, mode="self")
    ensure(code == "permission-denied", f"updating another seat's task answered {code}")
    ensure(await get(ctx, task["taskId"]) == held, "the refused update changed the record")
    return "update-task of another seat's task is permission-denied; the record is unchanged"
