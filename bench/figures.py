"""Rounds, medians with their spread, and the table ``make bench`` prints.

A figure is measured in several rounds; the table shows the median and the spread
(lowest–highest round), the limit it is compared with (measured in the same run), the
ratio of the medians, the target ratio and whether it is met.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rounds:
    """One figure measured in several rounds."""

    rounds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)


class Rate(Rounds):
    """Operations per second over rounds."""

    def spread(self) -> str:
        return f"{min(self.rounds):,.0f}–{max(self.rounds):,.0f}"

    def __str__(self) -> str:
        return f"{self.median:,.0f}/s ({self.spread()})"


class Seconds(Rounds):
    """A duration over rounds (lower is better)."""

    def __str__(self) -> str:
        return f"{self.median:.2f} s ({min(self.rounds):.2f}–{max(self.rounds):.2f})"


async def rounds_of(
    op: Callable[[int], Awaitable[object]],
    *,
    ops: int,
    rounds: int,
    concurrency: int = 1,
    warm_up: int = 0,
) -> Rate:
    """``rounds`` rounds of ``ops`` calls, ``concurrency`` callers at a time; ``op(i)``
    gets a number unique across the whole measurement (warm-up included)."""
    counter = 0

    async def one_round(count: int) -> float:
        nonlocal counter
        base = counter
        counter += count
        per = count // concurrency

        async def caller(c: int) -> None:
            for j in range(per):
                await op(base + c * per + j)

        start = time.perf_counter()
        await asyncio.gather(*(caller(c) for c in range(concurrency)))
        return per * concurrency / (time.perf_counter() - start)

    if warm_up:
        await one_round(warm_up)
    return Rate(tuple([await one_round(ops) for _ in range(rounds)]))


def sync_rounds(op: Callable[[int], object], *, ops: int, rounds: int) -> Rate:
    """The same, for a blocking call (a raw driver baseline)."""
    counter = 0
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(ops):
            op(counter)
            counter += 1
        results.append(ops / (time.perf_counter() - start))
    return Rate(tuple(results))


@dataclass
class Row:
    name: str
    value: str
    limit: str
    ratio: float | None
    target: str
    met: bool | None


class Table:
    """Rows of one section, printed together."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[Row] = []

    def limit(self, name: str, rate: Rate, unit: str = "/s") -> None:
        """A physical limit itself (ratio 1)."""
        self.rows.append(Row(name, _value(rate, unit), "(the limit)", 1.0, "", None))

    def at_least(
        self, name: str, rate: Rate, limit: Rate | None, target: float, unit: str = "/s"
    ) -> float:
        """``rate`` as a share of ``limit`` (or, without one, of the absolute ``target``)."""
        if limit is None:
            ratio = rate.median / target
            self.rows.append(
                Row(name, _value(rate, unit), f"{target:,.0f}{unit}", ratio, ">= 1", ratio >= 1)
            )
            return ratio
        ratio = rate.median / limit.median
        met = ratio >= target
        self.rows.append(
            Row(name, _value(rate, unit), _value(limit, unit), ratio, f">= {target}", met)
        )
        return ratio

    def cost_at_most(self, name: str, rate: Rate, limit: Rate, target: float) -> float:
        """The cost of ``rate``'s operation as a multiple of ``limit``'s (lower is better)."""
        ratio = limit.median / rate.median
        met = ratio <= target
        self.rows.append(
            Row(name, _value(rate, "/s"), _value(limit, "/s"), ratio, f"<= {target}", met)
        )
        return ratio

    def limit_seconds(self, name: str, limit: Seconds) -> None:
        """A duration that is itself the limit (ratio 1)."""
        self.rows.append(Row(name, str(limit), "(the limit)", 1.0, "", None))

    def seconds_at_most(self, name: str, took: Seconds, limit: Seconds, target: float) -> float:
        """A duration as a multiple of ``limit``'s (lower is better)."""
        ratio = took.median / limit.median
        met = ratio <= target
        self.rows.append(Row(name, str(took), str(limit), ratio, f"<= {target}", met))
        return ratio

    def ratio_at_most(self, name: str, value: str, limit: str, ratio: float, target: float) -> None:
        """A figure already reduced to ``ratio`` of its limit (lower is better)."""
        self.rows.append(Row(name, value, limit, ratio, f"<= {target}", ratio <= target))

    def seconds_beside(self, name: str, took: Seconds, limit: Seconds) -> None:
        """A duration as a multiple of ``limit``'s, without a target (for context)."""
        ratio = took.median / limit.median
        self.rows.append(Row(name, str(took), str(limit), ratio, "none", None))

    def info(
        self, name: str, rate: Rate, limit: Rate, *, cost: bool = False, target: str = ""
    ) -> None:
        """A figure beside a limit, without a target (for context); ``target`` says so in
        the target column where a reader would look for one ("none")."""
        ratio = limit.median / rate.median if cost else rate.median / limit.median
        self.rows.append(Row(name, _value(rate, "/s"), _value(limit, "/s"), ratio, target, None))

    def note(self, name: str, value: str, target: str = "", met: bool | None = None) -> None:
        self.rows.append(Row(name, value, "", None, target, met))

    def print(self) -> None:
        print(f"\n{self.title}")
        header = ("figure", "measured (median, spread)", "limit", "ratio", "target", "")
        widths = (58, 30, 30, 6, 9, 6)
        print("  " + " ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for row in self.rows:
            ratio = "" if row.ratio is None else f"{row.ratio:.3f}"
            met = "" if row.met is None else ("met" if row.met else "MISSED")
            cells = (row.name, row.value, row.limit, ratio, row.target, met)
            print("  " + " ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


def _value(rate: Rate, unit: str) -> str:
    return f"{rate.median:,.0f}{unit} ({rate.spread()})"
