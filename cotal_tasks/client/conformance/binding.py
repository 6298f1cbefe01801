"""Section 6, checks 9 to 17: binding by an operator, incarnations, environments, the page
ceiling, secrets, envelope-id idempotency and the status-binding invariant."""

from __future__ import annotations

import json
import secrets

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
from cotal_tasks.client.errors import TasksError
from cotal_tasks.core import Seat
from cotal_tasks.core.commands import Mode

ADMISSIBLE_ENVIRONMENT = "k8s://cluster-a/ns/team-7 · räum ✓"
REFUSED_ENVIRONMENT = "https://user:pass@host/x"
SECRETS = {
    "title": "password=hunter2-correct-horse",
    "brief": "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig",
}
TASK_FIELDS = {
    "version", "taskId", "space", "title", "brief", "status", "statusSource", "binding",
    "evidence", "createdAt", "updatedAt",
}  # fmt: skip
REQUIRED_TASK_FIELDS = TASK_FIELDS - {"brief", "statusSource", "binding"}
BINDING_FIELDS = {
    "owner", "actor", "lifecycleUid", "environment", "environmentWithheld", "boundAt", "boundBy",
}  # fmt: skip
EVIDENCE_FIELDS = {"kind", "ref", "addedAt"}
LARGE_LIMIT = 100_000


async def bind_as(ctx: Context, task_id: str, target: Seat, mode: Mode = "owner") -> Json:
    reply = await ctx.call(
        "operator",
        "bind-task",
        {"taskId": task_id},
        mode=mode,
        target=target,
    )
    if not reply.get("ok"):
        error = reply.get("error", {})
        raise Failed(f"bind-task was refused: {error.get('code')}: {error.get('message')}")
    data: Json = reply["data"]
    return data


async def check_09(ctx: Context) -> str:
    target = ctx.seat("target")
    operator = ctx.seat("operator")
    await ctx.spawn(target)
    task = await create(ctx, "operator", "Bind me")
    bound = await bind_as(ctx, task["taskId"], target)
    ensure(bound["status"] == "claimed", f"bind-task answered status {bound['status']}")
    ensure(binding_triple(bound) == triple(target), f"the binding is {bound.get('binding')}")
    ensure(bound["binding"].get("boundBy") == operator.principal, "boundBy is not the operator")
    ensure(await get(ctx, task["taskId"]) == bound, "get-task differs from the bind's record")
    ensure(task["taskId"] in await my_ids(ctx, "target"), "the target's my-tasks misses it")
    return "an operator's bind-task records the target triple it named; the seat sees it"


async def check_09_broker(ctx: Context) -> str:
    """The broker half: a credential holding only tasks.self cannot even publish a bind."""
    if "self-only" not in ctx.given:
        raise Skipped(
            "needs per-role credentials: --creds self-only=FILE for a seat holding only "
            "tasks.self (and --seat self-only=OWNER.ACTOR/UID)"
        )
    self_only = ctx.given["self-only"]
    task = await create(ctx, "operator", "Only an operator binds this")
    client = ctx.client(self_only)
    refusals = []
    for mode in ("owner", "any"):
        try:
            await client.invoke_answer(
                "bind-task", {"taskId": task["taskId"]}, mode=mode, target=self_only.seat
            )
        except TasksError as exc:
            ensure(
                (exc.code.value, exc.outcome) == ("permission-denied", "not-executed")
                and exc.reply is None,
                f"a tasks.self seat's bind at mode {mode} came back {exc.code.value}: "
                f"{exc.message}",
            )
            refusals.append(mode)
        else:
            raise Failed(f"a tasks.self seat's bind at mode {mode} reached the endpoint")
    record = await get(ctx, task["taskId"])
    ensure(record["status"] == "open" and "binding" not in record, "the task got bound")
    bound = await bind_as(ctx, task["taskId"], self_only.seat)
    ensure(binding_triple(bound) == triple(self_only.seat), "the operator's bind failed")
    return (
        "a tasks.self credential's bind-task is refused by the broker at publish (modes "
        f"{' and '.join(refusals)}); the operator's credential binds"
    )


async def check_10(ctx: Context) -> str:
    old, new = ctx.actor("worker", 1), ctx.actor("worker", 2)
    if ctx.stage:
        await ctx.spawn(old.seat)
    task = await create(ctx, "operator", "Outlives its seat")
    held = await claim(ctx, old, task["taskId"])
    ensure(binding_triple(held) == triple(old.seat), f"the claim bound {held.get('binding')}")
    if ctx.stage:
        await ctx.spawn(new.seat)  # the seat stops; a new one runs under the same name
    record = await get(ctx, task["taskId"])
    ensure(record == held, "the record changed when a new incarnation appeared")
    ensure(task["taskId"] not in await my_ids(ctx, new), "the new incarnation lists the task")
    code, _ = await ctx.refused(
        new, "update-task", {"taskId": task["taskId"], "status": "done"}, mode="self"
    )
    ensure(code == "permission-denied", f"the new incarnation's update answered {code}")
    ensure(await get(ctx, task["taskId"]) == held, "the refused update changed the record")
    return "a new incarnation of the seat neither lists nor may update the old one's task"


async def check_11(ctx: Context) -> str:
    cases: list[tuple[str, str | None]] = [
        ("envok", ADMISSIBLE_ENVIRONMENT),
        ("envnone", None),
        ("envbad", REFUSED_ENVIRONMENT),
    ]
    for role, environment in cases:
        await ctx.spawn(ctx.seat(role), environment)
    for role, environment in cases:
        seat = ctx.seat(role)
        claimed = await create(ctx, "operator", f"Claimed by {seat.actor}")
        bound = await create(ctx, "operator", f"Bound to {seat.actor}")
        records = [
            await claim(ctx, role, claimed["taskId"]),
            await bind_as(ctx, bound["taskId"], seat),
        ]
        records += [await get(ctx, r["taskId"]) for r in records]
        for record in records:
            binding = record["binding"]
            ensure(binding_triple(record) == triple(seat), f"the binding is {binding}")
            if environment is None:
                ensure("environment" not in binding and "environmentWithheld" not in binding,
                       f"a seat without an environment got {binding}")  # fmt: skip
            elif environment == ADMISSIBLE_ENVIRONMENT:
                ensure(binding.get("environment") == environment, f"environment is {binding}")
                ensure("environmentWithheld" not in binding, f"withheld as well: {binding}")
            else:
                ensure("environment" not in binding and binding.get("environmentWithheld") is True,
                       f"a refused environment gave {binding}")  # fmt: skip
                text = json.dumps(record, ensure_ascii=False)
                ensure("user:pass" not in text, "the refused environment leaked into the record")
    return "environment verbatim, absent, or withheld: the three cases are distinct"


async def check_12(ctx: Context) -> str:
    first = await page(ctx, limit=LARGE_LIMIT)
    ceiling = first["appliedLimit"]
    ensure(isinstance(ceiling, int) and 1 <= ceiling < LARGE_LIMIT, f"appliedLimit is {ceiling}")
    ensure(
        len(first["tasks"]) <= ceiling, f"{len(first['tasks'])} tasks over appliedLimit {ceiling}"
    )
    if "nextCursor" not in first:  # fill the board past the ceiling, then read again
        for i in range(ceiling + 1 - len(first["tasks"])):
            await create(ctx, "reader", f"Task {i}")
        first = await page(ctx, limit=LARGE_LIMIT)
    ensure(first["appliedLimit"] == ceiling, "appliedLimit changed between pages")
    ensure(
        len(first["tasks"]) == ceiling, f"a full page holds {len(first['tasks'])}, not {ceiling}"
    )
    ensure("nextCursor" in first, "a board past the ceiling gives no nextCursor")
    rest = await page(ctx, limit=LARGE_LIMIT, cursor=first["nextCursor"])
    ensure(
        rest["appliedLimit"] == ceiling, f"the next page's appliedLimit is {rest['appliedLimit']}"
    )
    seen = {t["taskId"] for t in first["tasks"]}
    ensure(not seen & {t["taskId"] for t in rest["tasks"]}, "the next page repeats tasks")
    return f"limit {LARGE_LIMIT} is capped at the ceiling {ceiling}, reported in appliedLimit"


def only_record_fields(record: Json, *, summary: bool = False) -> None:
    extra = set(record) - TASK_FIELDS
    ensure(not extra, f"a record carries fields outside section 2: {sorted(extra)}")
    missing = REQUIRED_TASK_FIELDS - ({"evidence"} if summary else set()) - set(record)
    ensure(not missing, f"a record lacks {sorted(missing)}")
    ensure(set(record.get("binding", {})) <= BINDING_FIELDS, "a binding carries other fields")
    for entry in record.get("evidence", []):
        ensure(set(entry) == EVIDENCE_FIELDS, f"an evidence entry carries {sorted(entry)}")


async def check_13(ctx: Context) -> str:
    before = await page(ctx)
    for key, secret in SECRETS.items():
        reply = await ctx.call("operator", "create-task", {"title": "Harmless title", key: secret})
        ensure(reply.get("ok") is False, f"a {key} holding a credential was accepted")
        ensure(reply["error"]["code"] == "bad-request", f"answered {reply['error']['code']}")
        ensure(secret not in json.dumps(reply), "the refusal quotes the secret")
    ensure(
        (await page(ctx))["changeSeq"] == before["changeSeq"], "a refused create changed the board"
    )
    task = await create(
        ctx, "operator", "Rotate the staging certificates", brief="The key lives in the team vault."
    )
    await claim(ctx, "worker", task["taskId"])
    evidence = {"taskId": task["taskId"], "evidence": [{"kind": "run", "ref": "token=abc123"}]}
    code, _ = await ctx.refused("worker", "update-task", evidence, mode="self")
    ensure(code == "bad-request", f"credential-shaped evidence answered {code}")
    record = await get(ctx, task["taskId"])
    only_record_fields(record)
    ensure(record["evidence"] == [], "the refused evidence was stored")
    listed = await page(ctx)
    for summary in listed["tasks"]:
        only_record_fields(summary, summary=True)
        ensure("brief" not in summary and "evidence" not in summary, "a summary has a brief")
    text = json.dumps([record, listed], ensure_ascii=False)
    for secret in (*SECRETS.values(), "token=abc123"):
        ensure(secret not in text, "a secret reached a record")
    return (
        "credential-shaped text is refused (bad-request, not quoted); records hold only "
        "section 2's fields"
    )


async def check_14(ctx: Context) -> str:
    pinned = "conformance-" + secrets.token_hex(8)
    first = await ctx.ok("operator", "create-task", {"title": "Only once"}, envelope_id=pinned)
    seq = (await page(ctx))["changeSeq"]
    second = await ctx.ok("operator", "create-task", {"title": "Only once"}, envelope_id=pinned)
    ensure(second == first, "the second create-task with the same id answered another task")
    ensure((await page(ctx))["changeSeq"] == seq, "the repeated create changed the board")
    return "two create-task calls pinning one envelope id create one task"


async def check_15(ctx: Context) -> str:
    before = (await page(ctx))["changeSeq"]
    for status in ("claimed", "blocked"):
        code, outcome = await ctx.refused(
            "operator", "create-task", {"title": "x", "status": status}
        )
        ensure((code, outcome) == ("bad-request", "not-executed"), f"{status}: {code}/{outcome}")
    ensure((await page(ctx))["changeSeq"] == before, "a refused create changed the board")
    return "create-task with status claimed or blocked is bad-request, not-executed"


async def check_16(ctx: Context) -> str:
    task = await create(ctx, "operator", "Stay bound")
    held = await claim(ctx, "worker", task["taskId"])
    args = {"taskId": task["taskId"], "status": "open"}
    code, _ = await ctx.refused("worker", "update-task", args, mode="self")
    ensure(code == "bad-request", f"update-task to open while bound answered {code}")
    ensure(await get(ctx, task["taskId"]) == held, "the refused update changed the record")
    return "update-task to open while bound is bad-request; the record is unchanged"


async def check_17(ctx: Context) -> str:
    task = await create(ctx, "operator", "Seat is gone")
    await claim(ctx, "worker", task["taskId"])
    args = {"taskId": task["taskId"], "unbind": True, "note": "Seat is gone."}
    freed: Json = await ctx.ok("operator", "administer-task", args)
    ensure(freed["status"] == "open", f"the unbound task reads {freed['status']}")
    ensure("binding" not in freed, "the unbound task still carries a binding")
    ensure(await get(ctx, task["taskId"]) == freed, "get-task differs from the answer")
    ensure(task["taskId"] not in await my_ids(ctx, "worker"), "the old seat still lists it")
    return "administer-task with unbind answers a task that is open and carries no binding"
