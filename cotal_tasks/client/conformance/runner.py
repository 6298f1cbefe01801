"""The checks in order, and the run: one verdict per check, a closing count.

Every check is an async function of the ``Context`` that returns what it saw (a PASS),
raises ``Failed`` with what it saw instead, or ``Skipped`` with what it needs. An
exception of any other kind, the client's included, is a FAIL naming it: a runner that
cannot tell is not allowed to pass.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from cotal_tasks.client.conformance import binding, positive, reads
from cotal_tasks.client.conformance.context import Context, Failed, Skipped
from cotal_tasks.client.errors import TasksError

Status = Literal["PASS", "FAIL", "SKIP"]
CheckFn = Callable[[Context], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # "06-claim-binds-and-repeats"
    title: str
    run: CheckFn


@dataclass(frozen=True, slots=True)
class Result:
    check: Check
    status: Status
    seen: str

    def line(self) -> str:
        return f"{self.status} {self.check.name} — {self.seen}"


CHECKS: tuple[Check, ...] = (
    Check("01-describe", "describe lists the eight commands", reads.check_01),
    Check("02-empty-list", "list-tasks on an empty board", reads.check_02),
    Check("03-unreadable-store", "an unreadable store is unavailable", reads.check_03),
    Check("04-absent-task", "get-task of an absent task is not-found", reads.check_04),
    Check("05-my-tasks", "my-tasks is the caller's own; untargeted is refused", reads.check_05),
    Check("06-claim", "claim binds the caller, and repeats", reads.check_06),
    Check("07-claim-conflict", "claiming another seat's task is conflict", reads.check_07),
    Check("08-update-denied", "updating another seat's task is denied", reads.check_08),
    Check("09-operator-bind", "an operator's bind records the target", binding.check_09),
    Check("09-broker-bind", "a tasks.self seat cannot publish a bind", binding.check_09_broker),
    Check("10-new-incarnation", "a new incarnation inherits nothing", binding.check_10),
    Check("11-environment", "environment: verbatim, absent, withheld", binding.check_11),
    Check("12-page-ceiling", "list limit is capped at the ceiling", binding.check_12),
    Check("13-no-secrets", "records carry no secret", binding.check_13),
    Check("14-envelope-id", "one envelope id creates one task", binding.check_14),
    Check("15-create-bound-status", "create refuses claimed and blocked", binding.check_15),
    Check("16-update-open", "update to open while bound is refused", binding.check_16),
    Check("17-administer-unbind", "unbind reopens and clears the binding", binding.check_17),
    Check("18-claim-path", "create, claim, get name the caller", positive.check_18),
    Check("19-blocked", "update to blocked keeps the binding", positive.check_19),
    Check("20-evidence", "commit evidence round-trips", positive.check_20),
    Check("21-done", "update to done keeps the binding", positive.check_21),
    Check("22-my-tasks-done", "my-tasks lists claimed and done", positive.check_22),
    Check("23-board-changed", "board-changed carries only the counter", positive.check_23),
    Check("24-change-seq", "changeSeq is monotone, appliedLimit always", positive.check_24),
    Check("ep-v1-rail", "the sequence on the ep.v1 rail", positive.check_ep_v1),
)
BY_NAME = {check.name: check for check in CHECKS}


def select(names: Iterable[str] | None) -> tuple[Check, ...]:
    """The checks whose name starts with one of ``names`` (every check when none)."""
    wanted = list(names or ())
    if not wanted:
        return CHECKS
    chosen = tuple(c for c in CHECKS if any(c.name.startswith(w) for w in wanted))
    unknown = [w for w in wanted if not any(c.name.startswith(w) for c in CHECKS)]
    if unknown:
        raise ValueError(
            f"no check is named {', '.join(unknown)}. Name one of {', '.join(BY_NAME)}"
        )
    return chosen


async def run_check(ctx: Context, check: Check) -> Result:
    ctx.begin(check.name.split("-", 1)[0])
    try:
        seen = await check.run(ctx)
    except Skipped as exc:
        return Result(check, "SKIP", str(exc))
    except Failed as exc:
        return Result(check, "FAIL", str(exc))
    except TasksError as exc:
        return Result(check, "FAIL", f"{exc.code.value} ({exc.outcome}): {exc.message}")
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Result(
            check, "FAIL", f"{type(exc).__name__}: {exc} (at {where.name}:{where.lineno})"
        )
    return Result(check, "PASS", seen)


async def run_checks(
    ctx: Context,
    checks: Iterable[Check] = CHECKS,
    report: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run ``checks`` in order against ``ctx``; report each result as it comes."""
    results = []
    for check in checks:
        result = await run_check(ctx, check)
        if report is not None:
            report(result)
        results.append(result)
    return results


def summary(results: Iterable[Result]) -> str:
    counted = list(results)
    passed = sum(r.status == "PASS" for r in counted)
    failed = sum(r.status == "FAIL" for r in counted)
    skipped = sum(r.status == "SKIP" for r in counted)
    return f"conformance: {passed} passed, {failed} failed, {skipped} skipped"
