"""The lane analysis (``tests/support/lanes.py``): a test is marked by what it reaches,
through helpers, closures and fixtures of the test package, and only by that. (The first
two tests below name such helpers, so the analysis puts them in the broker and slow lanes
too, though they start nothing: it errs on the side of a lane.)"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.support.bridge import broker
from tests.support.cli import run
from tests.support.lanes import BROKER, SLOW, Reach
from tests.support.loopback import loopback_mesh


async def _through_a_helper(tmp: Path) -> None:
    async with broker(tmp):
        pass


def _in_a_closure() -> object:
    async def inner() -> None:
        await run("--help")

    return inner


def _plain(n: int) -> int:
    return n + 1


@given(st.integers())
def _property(n: int) -> None:
    assert _plain(n) > n


def test_a_broker_reached_through_a_helper_marks_broker() -> None:
    assert Reach().of(_through_a_helper) == {BROKER}


def test_a_subprocess_reached_in_a_closure_marks_slow() -> None:
    assert SLOW in Reach().of(_in_a_closure)


def test_the_loopback_wire_and_plain_code_mark_nothing() -> None:
    reach = Reach()
    assert reach.of(loopback_mesh) == frozenset()
    assert reach.of(_plain) == frozenset()


def test_a_property_test_is_seen_as_one() -> None:
    assert getattr(_property, "is_hypothesis_test", False)
