"""The suite's lanes: every test is marked by what it starts, found from what it reaches.

A test is marked ``broker`` when it reaches a nats-server (``EmbeddedNats``, or a bridge
that starts one), ``slow`` when it reaches a subprocess (the CLI, a bridge process, a
migration tool), a fake tracker served over loopback, or is a Hypothesis property test,
``browser`` when it reaches Playwright, and ``postgres`` when it needs the test PostgreSQL
(a fixture that asks for it, or a backend parameter named ``postgres``).
"Reaches" follows the test function, its fixtures, and every function and class of the
test package they name (closures and nested functions included), down to a few roots in
``ROOTS``; nothing in the project's package is followed, only named. So a new test is
marked by what it uses, without a decorator.

``make test-fast`` deselects the four markers. The analysis is checked at run time: an
unmarked test that starts a nats-server or a subprocess fails naming the marker it
escaped (``guard``), so a gap in the analysis cannot hide in the fast lane. (PostgreSQL is
found from fixtures and parameters alone: a test may well connect to an address where no
database listens, to see the refusal.)
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import subprocess
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from cotal_tasks.bridge.process.broker import EmbeddedNats
from cotal_tasks.bridge.wiring.process import running_bridge
from tests.support.fake_tracker import serve_on_loopback

BROKER, POSTGRES, BROWSER, SLOW = "broker", "postgres", "browser", "slow"
LANE_MARKERS = (BROKER, POSTGRES, BROWSER, SLOW)
FIXTURES_NEEDING_POSTGRES = frozenset({"postgres_url", "postgres_database"})


def _roots() -> dict[int, str]:
    """The objects whose reach marks a test, by identity."""
    roots: dict[int, str] = {}
    for starts in (EmbeddedNats, running_bridge, inspect.unwrap(running_bridge)):
        roots[id(starts)] = BROKER
    # A fake tracker served over loopback (uvicorn in the test's loop): the hosted suites,
    # a second or more a test. The in-process fakes (an ASGI transport) are fast.
    roots[id(inspect.unwrap(serve_on_loopback))] = SLOW
    for spawn in (
        asyncio.create_subprocess_exec,
        asyncio.create_subprocess_shell,
        subprocess.run,
        subprocess.Popen,
        subprocess.check_output,
        subprocess.check_call,
        subprocess.call,
    ):
        roots[id(spawn)] = SLOW
    return roots


ROOTS = _roots()


def _in_tests(obj: object) -> bool:
    """Whether ``obj`` is the test package's own (this module's ``guard`` names the roots
    without reaching them)."""
    module = getattr(obj, "__module__", None) or ""
    return module.split(".")[0] == "tests" and module != __name__


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


class Reach:
    """What the functions and classes of the test package reach, memoised."""

    def __init__(self) -> None:
        self._seen: dict[int, frozenset[str]] = {}

    def of(self, obj: object) -> frozenset[str]:
        if callable(obj):
            with contextlib.suppress(ValueError):  # a wrapper loop: the object as it is
                obj = inspect.unwrap(obj)
        key = id(obj)
        if key in self._seen:
            return self._seen[key]
        self._seen[key] = frozenset()  # a cycle reaches nothing new
        found = self._reach(obj)
        self._seen[key] = found
        return found

    def _reach(self, obj: object) -> frozenset[str]:
        if id(obj) in ROOTS:
            return frozenset({ROOTS[id(obj)]})
        if isinstance(obj, types.ModuleType):
            return frozenset({BROWSER}) if obj.__name__.startswith("playwright") else frozenset()
        if isinstance(obj, type):
            if not _in_tests(obj):
                return frozenset()
            found: set[str] = set()
            for base in obj.__mro__:
                if _in_tests(base):
                    for member in vars(base).values():
                        found |= self._member(member)
            return frozenset(found)
        if isinstance(obj, types.MethodType):
            return self.of(obj.__func__)
        if isinstance(obj, types.FunctionType):
            return self._function(obj) if _in_tests(obj) else frozenset()
        if isinstance(obj, dict):
            return self._all(obj.values())
        if isinstance(obj, list | tuple | set | frozenset):
            return self._all(obj)
        if _in_tests(type(obj)):  # an instance the test package made: what it holds, too
            return self.of(type(obj)) | self._all(getattr(obj, "__dict__", {}).values())
        return frozenset()

    def _all(self, objects: Iterable[object]) -> frozenset[str]:
        found: set[str] = set()
        for member in objects:
            found |= self.of(member)
        return frozenset(found)

    def _member(self, member: object) -> frozenset[str]:
        if isinstance(member, staticmethod | classmethod):
            return self.of(member.__func__)
        if isinstance(member, property):
            return frozenset().union(*(self.of(f) for f in (member.fget, member.fset) if f))
        if isinstance(member, types.FunctionType):
            return self.of(member)
        return frozenset()

    def _function(self, fn: types.FunctionType) -> frozenset[str]:
        scope: dict[str, Any] = {**vars(builtins), **fn.__globals__}
        names: set[str] = set()
        for code in _codes(fn.__code__):
            names.update(code.co_names)
        referenced: list[object] = [scope[name] for name in names if name in scope]
        # ``module.attr``: the attribute names of the same code, looked up on its modules.
        for module in [r for r in referenced if isinstance(r, types.ModuleType)]:
            referenced.extend(getattr(module, n) for n in names if hasattr(module, n))
        for cell in fn.__closure__ or ():
            try:
                referenced.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        found: set[str] = set()
        for target in referenced:
            found |= self.of(target)
        return frozenset(found)


def lanes_of(item: pytest.Item, reach: Reach) -> set[str]:
    """The lane markers ``item`` earns from its function, fixtures and parameters."""
    found: set[str] = set()
    function = getattr(item, "function", None)
    if function is not None:
        found |= reach.of(function)
        if getattr(function, "is_hypothesis_test", False):
            found.add(SLOW)  # a property test runs its body a hundred times or more
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for defs in info.name2fixturedefs.values():
            for fixture in defs:
                found |= reach.of(fixture.func)
    if FIXTURES_NEEDING_POSTGRES & set(getattr(item, "fixturenames", ())):
        found.add(POSTGRES)
    callspec = getattr(item, "callspec", None)
    if callspec is not None and POSTGRES in callspec.params.values():
        found.add(POSTGRES)
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test by what it starts: ``make test-fast`` runs what needs none of it."""
    reach = Reach()
    for item in items:
        present = {mark.name for mark in item.iter_markers()}
        for name in sorted(lanes_of(item, reach) - present):
            item.add_marker(name)


def _refuse(marker: str, what: str) -> Callable[..., Any]:
    def refused(*args: object, **kwargs: object) -> Any:
        pytest.fail(
            f"this test {what} but is not marked {marker!r}, so the fast lane would run it. "
            f"Mark it @pytest.mark.{marker}, or reach it through a helper of tests/support "
            "that the lane analysis (tests/support/lanes.py) follows"
        )

    return refused


@pytest.fixture(autouse=True)
def guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test of the fast lane (no lane marker) that starts a nats-server or a
    subprocess."""
    if any(request.node.get_closest_marker(name) for name in LANE_MARKERS):
        return
    monkeypatch.setattr(EmbeddedNats, "start", _refuse(BROKER, "starts a nats-server"))
    spawn = _refuse(SLOW, "starts a subprocess")
    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn)
    monkeypatch.setattr(asyncio, "create_subprocess_shell", spawn)
    monkeypatch.setattr(subprocess, "Popen", spawn)
