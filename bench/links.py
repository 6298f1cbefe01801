"""Evidence recall, shared by the tracker benches: how much of what a fake links became
evidence, and how much evidence names nothing the fake links."""

from __future__ import annotations

from collections.abc import Iterable

Link = tuple[str, str]  # (kind, ref) as the evidence names it


def score(pairs: Iterable[tuple[set[Link], set[Link]]]) -> tuple[int, int, int]:
    """For (links the fake holds, evidence the mirror holds) per issue: (links found,
    links held by the fake, evidence entries that are no link of the fake)."""
    found = expected = stray = 0
    for wanted, held in pairs:
        expected += len(wanted)
        found += len(wanted & held)
        stray += len(held - wanted)
    return found, expected, stray
