"""The dashboard in headless Chromium (Debian's ``chromium``, driven by Playwright; no
browser download): two endpoints in the right columns, a claim made over the wire showing
up without a reload, a stale and an unavailable endpoint marked, a token asked for, and a
screenshot saved under ``test-artifacts/``.

Without ``/usr/bin/chromium`` (or Playwright) these tests skip, and fail instead when
``COTAL_TASKS_REQUIRE_BROWSER=1`` (CI sets it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cotal_tasks.core import Seat, StaleMarker
from tests.bridge.http._support import (
    ACME,
    OPS,
    READER_ENV,
    SECRETS,
    TOKENS,
    HttpMesh,
    damage_board,
    make_stale,
    open_http_mesh,
    set_secrets,
)
from tests.conftest import seat

if TYPE_CHECKING:
    from playwright.async_api import Browser, ConsoleMessage, Locator, Page

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_ENV = "COTAL_TASKS_REQUIRE_BROWSER"
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OPERATOR = seat("operator", 9)
BUILDER = seat("builder", 1)
REVIEWER = seat("reviewer", 2)
Json = dict[str, Any]


def _unusable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 requires the browser tests to run")
    pytest.skip(f"{reason}; install Debian's chromium (apt-get install -y chromium) to run")


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.is_file():
        _unusable(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unusable("Playwright for Python is not installed (pip install -e '.[dev]')")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def keep_present(mesh: HttpMesh, who: Seat) -> None:
    """Republish a seat's card well within the presence time to live, as a live seat does."""
    while True:
        await mesh.space.present(who, environment="env://builder-1")
        await asyncio.sleep(2)


async def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    page = await browser.new_page(viewport={"width": 1440, "height": 960})
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
    return page.locator(f'section.lane[data-endpoint="{endpoint}"]')


def card(page: Page, endpoint: str, status: str, task_id: str) -> Locator:
    column = lane(page, endpoint).locator(f'.column[data-status="{status}"]')
    return column.locator(f'article.card[data-task-id="{task_id}"]')


async def test_two_endpoints_live_updates_and_a_stale_endpoint(
    tmp_path: Path, browser: Browser
) -> None:
    from playwright.async_api import expect

    async with open_http_mesh(tmp_path, names=(ACME, OPS)) as mesh:
        acme, ops = mesh.caller(OPERATOR, ACME), mesh.caller(OPERATOR, OPS)
        keeper = asyncio.create_task(keep_present(mesh, BUILDER))
        try:
            todo = await acme.ok(
                "create-task",
                {
                    "title": "Rotate the staging TLS certificates",
                    "brief": "They expire at the end of the month; update the deploy notes.",
                },
            )
            doing = await acme.ok("create-task", {"title": "Add retries to the upload step"})
            await mesh.caller(BUILDER, ACME).ok(
                "claim-task", {"taskId": doing["taskId"]}, mode="self"
            )
            shipped = await acme.ok(
                "create-task",
                {
                    "title": "Fix the flaky presence test",
                    "status": "done",
                    "evidence": [
                        {"kind": "review", "ref": "https://github.com/example/app/pull/128"},
                        {"kind": "commit", "ref": "9f2c1e7"},
                    ],
                },
            )
            rota = await ops.ok("create-task", {"title": "Renew the on-call rota"})
            stuck = await ops.ok("create-task", {"title": "Move the board to PostgreSQL"})
            reviewer = mesh.caller(REVIEWER, OPS)
            await reviewer.ok("claim-task", {"taskId": stuck["taskId"]}, mode="self")
            await reviewer.ok(
                "update-task",
                {"taskId": stuck["taskId"], "status": "blocked", "note": "waiting on ops"},
                mode="self",
            )
            dropped = await ops.ok(
                "create-task", {"title": "Evaluate a second broker", "status": "dropped"}
            )
            stale_since = int(time.time() * 1000) - 15 * 60_000
            make_stale(
                mesh,
                OPS,
                StaleMarker(staleAsOf=stale_since, reason="the GitHub sync is failing (502)"),
            )

            page, errors = await open_page(browser, mesh.url + "/")
            where = [
                (ACME, "open", todo),
                (ACME, "claimed", doing),
                (ACME, "done", shipped),
                (OPS, "open", rota),
                (OPS, "blocked", stuck),
                (OPS, "dropped", dropped),
            ]
            for endpoint, status, task in where:
                found = card(page, endpoint, status, task["taskId"])
                await expect(found).to_be_visible()
                await expect(found.locator("h4")).to_have_text(task["title"])
            await expect(page.locator("#live")).to_have_attribute("data-state", "live")

            # The stale endpoint is marked; the other is not.
            await expect(lane(page, OPS)).to_have_attribute("data-stale", "true")
            await expect(lane(page, OPS).locator(".banner.stale")).to_contain_text(
                "the GitHub sync is failing (502)"
            )
            await expect(lane(page, ACME)).to_have_attribute("data-stale", "false")

            # Bindings with liveness: an offline seat stays bound, never "unassigned".
            claimed = card(page, ACME, "claimed", doing["taskId"])
            await expect(claimed.locator(".binding .who b")).to_have_text("local.builder")
            await expect(claimed.locator(".uid")).to_have_text(BUILDER.lifecycleUid)
            await expect(claimed.locator(".env")).to_have_text("env://builder-1")
            badge = claimed.locator(".badge")
            await expect(badge).to_have_attribute("data-view", "current")
            await expect(badge).to_have_attribute("data-seat", "online")
            blocked = card(page, OPS, "blocked", stuck["taskId"])
            await expect(blocked.locator(".binding")).to_have_attribute("data-bound", "true")
            await expect(blocked.locator(".badge")).to_have_attribute("data-seat", "offline")
            await expect(blocked.locator(".binding .who b")).to_have_text("local.reviewer")
            await expect(card(page, ACME, "open", todo["taskId"]).locator(".unbound")).to_have_text(
                "unassigned"
            )

            # Evidence: an https ref is a link, a commit ref is text.
            done = card(page, ACME, "done", shipped["taskId"])
            link = done.locator(".evidence a")
            await expect(link).to_have_attribute("href", "https://github.com/example/app/pull/128")
            await expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
            await expect(done.locator(".evidence .ref")).to_have_text("9f2c1e7")

            # A claim over the wire appears without a reload, woken by board-changed.
            await page.evaluate("window.__sameDocument = true")
            await mesh.caller(BUILDER, ACME).ok(
                "claim-task", {"taskId": todo["taskId"]}, mode="self"
            )
            await expect(card(page, ACME, "claimed", todo["taskId"])).to_be_visible(timeout=8000)
            await expect(card(page, ACME, "open", todo["taskId"])).to_have_count(0)
            assert await page.evaluate("window.__sameDocument") is True

            # Filters: by seat, by status, by endpoint.
            await page.select_option("#f-seat", str(BUILDER))
            await expect(card(page, OPS, "blocked", stuck["taskId"])).to_be_hidden()
            await expect(card(page, ACME, "claimed", doing["taskId"])).to_be_visible()
            await page.select_option("#f-seat", "")
            await page.locator('#f-status input[value="dropped"]').uncheck()
            await expect(lane(page, OPS).locator('.column[data-status="dropped"]')).to_be_hidden()
            await page.locator('#f-status input[value="dropped"]').check()
            await page.select_option("#f-endpoint", OPS)
            await expect(lane(page, ACME)).to_be_hidden()
            await page.select_option("#f-endpoint", "")
            await expect(lane(page, ACME)).to_be_visible()

            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            assert errors == []
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper


async def test_a_token_is_asked_for_and_an_unavailable_endpoint_marked(
    tmp_path: Path, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    set_secrets(monkeypatch)
    async with open_http_mesh(tmp_path, names=(ACME, OPS), tokens=TOKENS) as mesh:
        operator = mesh.caller(OPERATOR, ACME)
        task = await operator.ok("create-task", {"title": "Write the runbook"})
        for n in range(54):  # 55 open tasks: more than the 50 a column first shows
            await operator.ok("create-task", {"title": f"Triage issue {n}"})
        await mesh.caller(OPERATOR, OPS).ok("create-task", {"title": "Lost to a damaged board"})
        await damage_board(mesh, OPS)

        page, errors = await open_page(browser, mesh.url + "/")
        await expect(page.locator("#auth")).to_be_visible()
        await page.fill("#auth-token", SECRETS[READER_ENV])
        await page.click("#auth-form button[type=submit]")
        await expect(card(page, ACME, "open", task["taskId"])).to_be_visible()
        await expect(page.locator("#auth")).to_be_hidden()
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")

        await expect(lane(page, OPS)).to_have_attribute("data-unavailable", "true")
        banner = lane(page, OPS).locator(".banner.unavailable")
        await expect(banner).to_contain_text("Unavailable")
        await expect(banner).to_contain_text("retry")
        await expect(lane(page, ACME)).to_have_attribute("data-unavailable", "false")
        assert SECRETS[READER_ENV] not in page.url
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(
            path=str(ARTIFACTS / "dashboard-token-unavailable.png"), full_page=True
        )

        # A long column shows its first page and loads the rest on request.
        column = lane(page, ACME).locator('.column[data-status="open"]')
        await expect(column.locator(".count")).to_have_text("50+")
        await expect(column.locator("article.card")).to_have_count(50)
        await column.locator("button.more").click()
        await expect(column.locator("article.card")).to_have_count(55)
        await expect(column.locator(".count")).to_have_text("55")
        await expect(column.locator("button.more")).to_have_count(0)

        assert errors == []
