"""What the dashboard's browser tests share: Debian's Chromium under Playwright, pages that
record their errors, the axe-core scan, screenshots, and the test doubles the flow and sync
views are checked against."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cotal_tasks.core import Seat, StaleMarker
from cotal_tasks.providers.store import SyncState, TaskStore
from tests.bridge.http._support import HttpMesh, StaleStore

if TYPE_CHECKING:
    from playwright.async_api import Browser, ConsoleMessage, Locator, Page

Json = dict[str, Any]
STATUSES = ("open", "claimed", "blocked", "done", "dropped")
HOUR_MS = 3_600_000
CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_ENV = "COTAL_TASKS_REQUIRE_BROWSER"
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "dashboard"
AXE = Path(__file__).with_name("vendor") / "axe-core" / "axe.min.js"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unusable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 requires the browser tests to run")
    pytest.skip(f"{reason}; install Debian's chromium (apt-get install -y chromium) to run")


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium under Playwright, or a skip (a failure when CI requires it)."""
    if not CHROMIUM.is_file():
        _unusable(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unusable("Playwright for Python is not installed (pip install -e '.[dev]')")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@contextlib.asynccontextmanager
async def kept_present(mesh: HttpMesh, who: Seat) -> AsyncIterator[None]:
    """Republish a seat's card well within the presence time to live, as a live seat does."""

    async def keep() -> None:
        while True:
            await mesh.space.present(who, environment="env://builder-1")
            await asyncio.sleep(2)

    keeper = asyncio.create_task(keep())
    try:
        yield
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper


async def open_page(browser: Browser, url: str, width: int = 1400) -> tuple[Page, list[str]]:
    page = await browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def console(message: ConsoleMessage) -> None:
        # A refused read (401, 503) is logged by the browser itself; anything else, such as
        # a Content-Security-Policy violation, is an error of the page.
        if message.type == "error" and "Failed to load resource" not in message.text:
            errors.append(message.text)

    page.on("console", console)
    await page.goto(url)
    return page, errors


def lane(page: Page, endpoint: str) -> Locator:
    return page.locator(f'#board section.lane[data-endpoint="{endpoint}"]')


def card(page: Page, endpoint: str, status: str, task_id: str) -> Locator:
    column = lane(page, endpoint).locator(f'.column[data-status="{status}"]')
    return column.locator(f'article.card[data-task-id="{task_id}"]')


async def serious_violations(page: Page) -> list[str]:
    """axe-core run in the page (evaluated over the debugging protocol, so the page's own
    Content-Security-Policy stays in force): the serious and critical violations."""
    await page.evaluate(AXE.read_text(encoding="utf-8"))
    found: list[Json] = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


async def shoot(page: Page, name: str, width: int | None = None, full: bool = True) -> None:
    if width is not None:
        await page.set_viewport_size({"width": width, "height": 900})
        await page.wait_for_timeout(400)
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px"
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=str(ARTIFACTS / name), full_page=full)


def flow_counts(entries: list[Json], times: list[int]) -> list[dict[str, int]]:
    """Each task's status at each time: that of its last entry (by time) at or before it."""
    ordered = sorted(enumerate(entries), key=lambda pair: (pair[1]["at"], pair[0]))
    out = []
    for at in times:
        latest: dict[str, str] = {}
        for _, entry in ordered:
            if entry["at"] <= at:
                latest[entry["taskId"]] = entry["status"]
        out.append({status: list(latest.values()).count(status) for status in STATUSES})
    return out


@contextlib.contextmanager
def backdated(mesh: HttpMesh, name: str, at_ms: int) -> Iterator[None]:
    """Commit what runs inside as if at ``at_ms`` (the service's clock is injected)."""
    service = mesh.endpoint(name).service
    clock = service.clock
    service.clock = lambda: at_ms
    try:
        yield
    finally:
        service.clock = clock


@dataclass(frozen=True)
class Leading:
    """This instance runs the endpoint's sync, as a won election says."""

    since_ms: int | None
    role: str = "leader"


class DegradedStore(StaleStore):
    """A mirror's sync report: last success, and items mapped without a refused part."""

    def __init__(self, inner: TaskStore, synced_ms: int) -> None:
        super().__init__(inner, StaleMarker(staleAsOf=0, reason="unused"))
        self.synced_ms = synced_ms

    async def freshness(self) -> StaleMarker | None:
        return None

    async def sync_state(self) -> SyncState | None:
        return SyncState(self.synced_ms)

    def degradations(self) -> dict[str, Any]:
        return {"counts": {"title-too-long": 3, "credential-shaped-brief": 1}, "recent": []}
