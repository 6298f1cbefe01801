"""The dashboard in headless Chromium (Debian's ``chromium``, driven by Playwright; no
browser download), one browser for the module: cards in the right columns with what matters
on them, the task detail opened by click, keyboard and deep link and kept current by a claim
over the wire, the flow chart's counts checked against the history, the sync panel, an
accessibility scan with axe-core in the page, and screenshots at 1400 and 360 px wide
written to ``test-artifacts/dashboard/`` (git-ignored) for a reviewer to look at.

Without ``/usr/bin/chromium`` (or Playwright) these tests skip, and fail instead when
``COTAL_TASKS_REQUIRE_BROWSER=1`` (CI sets it).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from cotal_tasks.core import StaleMarker
from cotal_tasks.providers.provider import RateBudget
from tests.bridge.http._browser import (
    ARTIFACTS,
    HOUR_MS,
    STATUSES,
    DegradedStore,
    Leading,
    backdated,
    card,
    chromium,
    flow_counts,
    kept_present,
    lane,
    open_page,
    serious_violations,
    shoot,
)
from tests.bridge.http._support import (
    ACME,
    OPS,
    READER_ENV,
    SECRETS,
    TOKENS,
    damage_board,
    make_stale,
    open_http_mesh,
    set_secrets,
)
from tests.conftest import seat

if TYPE_CHECKING:
    from playwright.async_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


OPERATOR = seat("operator", 9)
BUILDER = seat("builder", 1)
REVIEWER = seat("reviewer", 2)
REVIEWER_AGAIN = seat("reviewer", 3)  # a newer incarnation of the same principal
ONCALL = seat("oncall", 4)
EMPTY = "com.acme.empty"
LONG_TITLE = (
    "Move the nightly export off the shared runner, split the archive step from the upload, "
    "retry the upload with backoff, and page the on-call only after the third failure"
)
Json = dict[str, Any]
TRACKER_REFS = """async () => {
  const { trackerRef } = await import('/static/render.js');
  const github = {
    provider: 'github', taskLink: 'https://github.com/acme/widgets/issues/{number}' };
  const gitlab = {
    provider: 'gitlab', taskLink: 'https://gitlab.example/acme/api/-/issues/{number}' };
  return [
    trackerRef({ taskId: 'acme/widgets#3' }, github).href,
    trackerRef({ taskId: 'acme/api#12' }, gitlab).href,
    trackerRef({ taskId: 'fix-login' }, { provider: 'tower-do' }).href,
    trackerRef({ taskId: 'acme/widgets#three' }, github).href,
  ];
}"""
READ_ROWS = """rows => rows.map(row => ({
  at: Number(row.dataset.at),
  counts: Object.fromEntries(
    [...row.querySelectorAll('td')].map(td => [td.dataset.status, Number(td.textContent)])),
}))"""


async def test_cards_the_detail_and_a_claim_seen_live(tmp_path: Path, browser: Browser) -> None:
    from playwright.async_api import expect

    async with (
        open_http_mesh(tmp_path, names=(ACME, OPS)) as mesh,
        kept_present(mesh, BUILDER),
        kept_present(mesh, REVIEWER_AGAIN),
    ):
        acme, ops = mesh.caller(OPERATOR, ACME), mesh.caller(OPERATOR, OPS)
        builder, reviewer = mesh.caller(BUILDER, ACME), mesh.caller(REVIEWER, OPS)
        todo = await acme.ok(
            "create-task",
            {"title": LONG_TITLE, "brief": "The runner is shared with the release builds."},
        )
        doing = await acme.ok(
            "create-task",
            {
                "title": "Add retries to the upload step",
                "evidence": [{"kind": "branch", "ref": "retry-upload"}],
            },
        )
        await builder.ok("claim-task", {"taskId": doing["taskId"]}, mode="self")
        shipped = await acme.ok(
            "create-task",
            {
                "title": "Fix the flaky presence test",
                "status": "done",
                "evidence": [
                    {"kind": "review", "ref": "https://github.com/example/app/pull/128"},
                    {"kind": "commit", "ref": "9f2c1e7"},
                    {"kind": "commit", "ref": "0b71d2a"},
                ],
            },
        )
        rota = await ops.ok("create-task", {"title": "Renew the on-call rota"})
        await mesh.caller(ONCALL, OPS).ok("claim-task", {"taskId": rota["taskId"]}, mode="self")
        stuck = await ops.ok("create-task", {"title": "Move the board to PostgreSQL"})
        await reviewer.ok("claim-task", {"taskId": stuck["taskId"]}, mode="self")
        await reviewer.ok(
            "update-task",
            {"taskId": stuck["taskId"], "status": "blocked", "note": "waiting on ops"},
            mode="self",
        )
        dropped = await ops.ok(
            "create-task", {"title": "Evaluate a second broker", "status": "dropped"}
        )
        make_stale(
            mesh,
            OPS,
            StaleMarker(
                staleAsOf=int(time.time() * 1000) - 15 * 60_000,
                reason="the GitHub sync is failing (502)",
            ),
        )

        page, errors = await open_page(browser, mesh.url + "/")
        for endpoint, status, task in [
            (ACME, "open", todo),
            (ACME, "claimed", doing),
            (ACME, "done", shipped),
            (OPS, "blocked", stuck),
            (OPS, "dropped", dropped),
        ]:
            await expect(card(page, endpoint, status, task["taskId"]).locator("h4")).to_have_text(
                task["title"]
            )
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        await expect(lane(page, OPS)).to_have_attribute("data-stale", "true")
        await expect(lane(page, OPS).locator(".banner.stale")).to_contain_text("(502)")
        # A stale endpoint's task is labelled stale in its detail too.
        await card(page, OPS, "dropped", dropped["taskId"]).locator("h4 a").click()
        await expect(page.locator("#detail .banner.stale")).to_contain_text("(502)")
        await page.keyboard.press("Escape")
        await expect(lane(page, ACME)).to_have_attribute("data-stale", "false")

        # The long title is clamped to three lines, whole in its tooltip.
        title = card(page, ACME, "open", todo["taskId"]).locator("h4")
        await expect(title).to_have_attribute("title", LONG_TITLE)
        lines = await title.evaluate(
            "h => h.getBoundingClientRect().height / parseFloat(getComputedStyle(h).lineHeight)"
        )
        assert lines <= 3.05, f"the title takes {lines:.1f} lines"

        # The seat as a short name, with a dot only because presence is populated.
        claimed = card(page, ACME, "claimed", doing["taskId"])
        await expect(claimed.locator(".seat .name")).to_have_text("builder")
        await expect(claimed.locator(".seat .dot")).to_have_attribute("data-seat", "online")
        tooltip = await claimed.locator(".seat").get_attribute("title")
        assert tooltip is not None
        assert tooltip.startswith("local.builder: online")
        blocked = card(page, OPS, "blocked", stuck["taskId"])
        await expect(blocked.locator(".seat .dot")).to_have_attribute("data-seat", "replaced")
        away = card(page, OPS, "claimed", rota["taskId"])
        await expect(away.locator(".seat .dot")).to_have_attribute("data-seat", "offline")
        tooltip = await away.locator(".seat").get_attribute("title")
        assert tooltip == "local.oncall: offline: no current presence card for this incarnation"
        await expect(card(page, ACME, "open", todo["taskId"]).locator(".seat")).to_have_text(
            "Unassigned"
        )
        # Evidence as icons with counts; no counters or raw uids on any card.
        done = card(page, ACME, "done", shipped["taskId"])
        await expect(done.locator('.ev[data-kind="review"]')).to_have_text("1")
        await expect(done.locator('.ev[data-kind="commit"]')).to_have_text("2")
        board_text = await page.locator("#board").inner_text()
        for jargon in ("unpopulated", "changeSeq", "Not read", BUILDER.lifecycleUid):
            assert jargon not in board_text

        # Click a card: the detail has the full record and its history.
        await page.evaluate("window.__sameDocument = true")
        await card(page, ACME, "open", todo["taskId"]).locator("h4 a").click()
        detail = page.locator("#detail")
        await expect(detail).to_be_visible()
        await expect(detail.locator("#detail-title")).to_have_text(LONG_TITLE)
        await expect(detail.locator(".brief")).to_have_text(
            "The runner is shared with the release builds."
        )
        assert f"task={quote(ACME + '/' + todo['taskId'], safe='')}" in page.url
        deep = f"#task={quote(ACME + '/' + todo['taskId'], safe='')}"
        await expect(detail.locator("a.permalink")).to_have_attribute("href", deep)
        events = detail.locator(".timeline .event")
        await expect(events).to_have_count(1)

        # A claim over the wire moves the card and lands in the open detail's history.
        await builder.ok("claim-task", {"taskId": todo["taskId"]}, mode="self")
        await expect(card(page, ACME, "claimed", todo["taskId"])).to_be_visible(timeout=8000)
        await expect(card(page, ACME, "open", todo["taskId"])).to_have_count(0)
        await expect(events).to_have_count(2, timeout=8000)
        await expect(events.first).to_have_attribute("data-command", "claim-task")
        await expect(events.first.locator(".actor")).to_have_text("builder")
        # The seat's session in words, its whole lifecycle uid the tooltip and under
        # "Record details".
        uid = detail.locator(".uid")
        await expect(uid).to_contain_text(BUILDER.lifecycleUid[-6:])
        await expect(uid).to_have_attribute("title", f"lifecycle uid {BUILDER.lifecycleUid}")
        await expect(detail.locator("details.raw")).to_contain_text(BUILDER.lifecycleUid)
        await expect(detail.locator("dd code").first).to_be_visible()
        assert await page.evaluate("window.__sameDocument") is True
        await shoot(page, "detail-1400.png", full=False)
        assert await serious_violations(page) == []

        # Escape closes it and gives the focus back to the card it came from.
        await page.keyboard.press("Escape")
        await expect(detail).to_be_hidden()
        moved = card(page, ACME, "claimed", todo["taskId"]).locator("h4 a")
        await expect(moved).to_be_focused()
        assert "task=" not in page.url
        # From the keyboard: Enter on a card opens it, Escape comes back.
        await card(page, ACME, "done", shipped["taskId"]).locator("h4 a").focus()
        await page.keyboard.press("Enter")
        await expect(detail.locator("#detail-title")).to_have_text(shipped["title"])
        await expect(detail.locator(".evidence li")).to_have_count(3)
        await expect(detail.locator(".evidence a")).to_have_attribute(
            "rel", "noopener noreferrer nofollow"
        )
        await page.keyboard.press("Escape")
        await expect(card(page, ACME, "done", shipped["taskId"]).locator("h4 a")).to_be_focused()

        # Arrow keys move between cards, down a column and across to the next.
        first = card(page, ACME, "claimed", doing["taskId"]).locator("h4 a")
        await first.focus()
        await page.keyboard.press("ArrowUp")
        await expect(moved).to_be_focused()  # the first created heads the column
        await page.keyboard.press("ArrowDown")
        await expect(first).to_be_focused()
        await page.keyboard.press("ArrowRight")
        await expect(card(page, ACME, "done", shipped["taskId"]).locator("h4 a")).to_be_focused()

        # The text filter narrows every column by title or id.
        await page.fill("#f-text", "flaky")
        await expect(card(page, ACME, "done", shipped["taskId"])).to_be_visible()
        await expect(card(page, ACME, "claimed", doing["taskId"])).to_have_count(0)
        await page.fill("#f-text", stuck["taskId"])
        await expect(card(page, OPS, "blocked", stuck["taskId"])).to_be_visible()
        await expect(lane(page, ACME).locator("article.card")).to_have_count(0)
        await page.fill("#f-text", "")
        await expect(card(page, ACME, "claimed", doing["taskId"])).to_be_visible()
        # Seat, status and endpoint filters.
        await page.select_option("#f-seat", str(BUILDER))
        await expect(card(page, OPS, "blocked", stuck["taskId"])).to_have_count(0)
        await page.select_option("#f-seat", "")
        await page.locator('#f-status input[value="dropped"]').uncheck()
        await expect(lane(page, OPS).locator('.column[data-status="dropped"]')).to_be_hidden()
        await page.locator('#f-status input[value="dropped"]').check()
        await page.select_option("#f-endpoint", OPS)
        await expect(lane(page, ACME)).to_be_hidden()
        await page.select_option("#f-endpoint", "")

        assert await serious_violations(page) == []
        await shoot(page, "board-1400.png")
        await shoot(page, "board-800.png", width=800)
        await shoot(page, "board-360.png", width=360)
        assert await serious_violations(page) == []
        await card(page, ACME, "claimed", doing["taskId"]).locator("h4 a").click()
        await expect(detail.locator("#detail-title")).to_have_text(doing["title"])
        await shoot(page, "detail-360.png", full=False)
        assert await serious_violations(page) == []
        assert errors == []


async def test_deep_link_flow_chart_and_sync_panel(tmp_path: Path, browser: Browser) -> None:
    from playwright.async_api import expect

    async with open_http_mesh(tmp_path, names=(ACME, OPS, EMPTY)) as mesh:
        now = int(time.time() * 1000)
        acme, builder = mesh.caller(OPERATOR, ACME), mesh.caller(BUILDER, ACME)
        ids = []
        for n, (age_h, claimed_h, blocked_h, done_h) in enumerate(
            [
                (150, 140, 100, 60),
                (120, 90, None, 30),
                (80, 70, 50, None),
                (40, 20, None, None),
                (10, None, None, None),
            ]
        ):
            with backdated(mesh, ACME, now - age_h * HOUR_MS):
                task_id = (await acme.ok("create-task", {"title": f"Flow task {n}"}))["taskId"]
            ids.append(task_id)
            if claimed_h is not None:
                with backdated(mesh, ACME, now - claimed_h * HOUR_MS):
                    await builder.ok("claim-task", {"taskId": task_id}, mode="self")
            if blocked_h is not None:
                with backdated(mesh, ACME, now - blocked_h * HOUR_MS):
                    await builder.ok(
                        "update-task",
                        {"taskId": task_id, "status": "blocked", "note": "waiting"},
                        mode="self",
                    )
            if done_h is not None:
                with backdated(mesh, ACME, now - done_h * HOUR_MS):
                    await builder.ok(
                        "update-task", {"taskId": task_id, "status": "done"}, mode="self"
                    )
        service = mesh.endpoint(OPS).service
        degraded = DegradedStore(service.store, now - 90_000)
        service.store = degraded
        assert mesh.bridge.http_app is not None
        served = mesh.bridge.http_app.asgi.state.context.endpoints
        # What a hosted endpoint's build declares: its sync role, its degradations, and the
        # rate-limit budget its tracker's answers reported (here two pools, one whose reset
        # has passed since it was read); a tracker that reports none leaves it empty.
        core = RateBudget(4200, 5000, now + 45 * 60_000, now - 60_000, "core")
        graphql = RateBudget(4990, 5000, now - 5 * 60_000, now - 20 * 60_000, "graphql")
        served[OPS] = replace(
            served[OPS],
            sync=Leading(now - 600_000),
            degradations=degraded.degradations,
            rate_budgets=lambda: (core, graphql),
        )
        served[EMPTY] = replace(served[EMPTY], sync=Leading(None), rate_budgets=lambda: ())
        metrics = mesh.bridge.http_app.asgi.state.context.metrics
        for status in ("200", "200", "304", "429"):
            metrics.tracker_request(OPS, status)
        metrics.rate_limit_wait(OPS, 75.0)

        # The deep link opens the detail on a fresh page.
        target = ids[0]
        url = f"{mesh.url}/#task={quote(ACME + '/' + target, safe='')}"
        page, errors = await open_page(browser, url)
        detail = page.locator("#detail")
        await expect(detail.locator("#detail-title")).to_have_text("Flow task 0")
        await expect(detail.locator(".timeline .event")).to_have_count(4)
        await page.keyboard.press("Escape")
        await expect(detail).to_be_hidden()

        # A tracker's task links to its issue page, as /v1/endpoints names it.
        refs = await page.evaluate(TRACKER_REFS)
        assert refs == [
            "https://github.com/acme/widgets/issues/3",
            "https://gitlab.example/acme/api/-/issues/12",
            None,  # a tower-do key: no page to link to
            None,  # not an issue number
        ]

        # A deep link to a task the endpoint does not have says so.
        await page.goto(f"{mesh.url}/#task={quote(ACME + '/t-nope', safe='')}")
        await expect(detail).to_have_attribute("data-state", "error")
        await expect(detail.locator(".banner")).to_contain_text("Not found")
        await page.keyboard.press("Escape")
        await expect(detail).to_be_hidden()

        # An endpoint with nothing yet says what it waits for.
        await expect(lane(page, EMPTY).locator(".lane-empty")).to_contain_text("first task")

        # The flow view: the chart's counts are the history's.
        await page.click("#view-flow")
        flow = page.locator(f'#flow section[data-endpoint="{ACME}"]')
        await expect(flow.locator(".flow-table tbody tr")).to_have_count(29)
        history = await mesh.ok(f"/v1/endpoints/{ACME}/history")
        entries: list[Json] = history["entries"]
        for window, points in (("7d", 29), ("24h", 25), ("30d", 31)):
            await flow.locator(f'button[data-window="{window}"]').click()
            rows = flow.locator(".flow-table tbody tr")
            await expect(rows).to_have_count(points)
            shown = await rows.evaluate_all(READ_ROWS)
            expected = flow_counts(entries, [row["at"] for row in shown])
            assert [row["counts"] for row in shown] == expected, window
            assert any(sum(c.values()) for c in expected[:-1]), "the window has history in it"
            legend = {
                status: int(
                    await flow.locator(f'.legend li[data-status="{status}"] b').inner_text()
                )
                for status in STATUSES
            }
            assert legend == expected[-1]
        await flow.locator('button[data-window="7d"]').click()
        await expect(flow.locator('button[data-window="7d"]')).to_be_focused()
        await expect(flow.locator('button[data-window="7d"]')).to_have_attribute(
            "aria-pressed", "true"
        )
        # A redraw (here on a change) keeps the table the reader opened.
        await flow.locator(".as-table summary").click()
        await acme.ok("create-task", {"title": "Flow task 5"})
        await expect(flow.locator('.legend li[data-status="open"] b')).to_have_text("2")
        await expect(flow.locator(".as-table")).to_have_attribute("open", "")
        # Time claimed: stints of 40 h (task 0), 60 h (1), 20 h (2) and 20 h so far (3).
        claimed = flow.locator('.time-in[data-status="claimed"]')
        await expect(claimed).to_have_attribute("data-n", "4")
        await expect(claimed.locator('[data-stat="median"]')).to_have_text("20h")
        await expect(claimed.locator('[data-stat="p90"]')).to_have_text("2.5d")
        # The sync panel reads /healthz: the last sync, and degraded items by reason.
        sync = page.locator(f'#flow .sync-tile[data-endpoint="{OPS}"]')
        await expect(sync.locator('[data-fact="lag"]')).to_have_text(re.compile(r"^[1-4]m$"))
        await expect(sync.locator('.reason[data-reason="title-too-long"] b')).to_have_text("3")
        await expect(sync.locator('[data-fact="role"]')).to_contain_text("Leader since")
        await expect(sync.locator('[data-fact="requests"]')).to_have_text(
            "4 since the bridge started, 1 refused (403/429)"
        )
        await expect(sync.locator('[data-fact="rate-limit"]')).to_contain_text("waited 1m")
        offset_min = await page.evaluate("new Date().getTimezoneOffset()")

        def hhmm(ms: int) -> str:
            return time.strftime("%H:%M", time.gmtime(ms / 1000 - offset_min * 60))

        budget = sync.locator('[data-fact="rate-budget"]')
        await expect(budget.locator('[data-pool="core"]')).to_have_text(
            f"core: 4200 of 5000 left, resets at {hhmm(core.reset_ms or 0)}"
        )
        await expect(budget.locator('[data-pool="graphql"]')).to_have_text(
            f"graphql: 4990 of 5000 left as of {hhmm(graphql.read_ms)}, "
            f"before the reset at {hhmm(graphql.reset_ms or 0)}"
        )
        unreported = page.locator(f'#flow .sync-tile[data-endpoint="{EMPTY}"]')
        await expect(unreported.locator('[data-fact="rate-budget"]')).to_have_text(
            "not reported by the tracker"
        )
        await expect(page.locator(f'#flow .sync-tile[data-endpoint="{ACME}"]')).to_contain_text(
            "own source of truth"
        )
        assert await serious_violations(page) == []
        await flow.locator(".as-table summary").click()  # closed for the wide picture
        await shoot(page, "flow-1400.png")
        await flow.locator(".as-table summary").click()
        await shoot(page, "flow-360.png", width=360)
        assert await serious_violations(page) == []  # narrow, with the table open
        # Back to the board, in the same document.
        await page.evaluate("window.__sameDocument = true")
        await page.click("#view-board")
        await expect(page.locator("#board")).to_be_visible()
        await expect(page.locator("#flow")).to_be_hidden()
        assert await page.evaluate("window.__sameDocument") is True
        assert errors == []


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
        # Never read, so no column claims to know its tasks ("Nothing waiting" would lie).
        await expect(lane(page, OPS).locator(".column")).to_have_count(0)
        assert SECRETS[READER_ENV] not in page.url
        assert await serious_violations(page) == []

        await lane(page, OPS).screenshot(path=str(ARTIFACTS / "unavailable-lane-1400.png"))

        # A long column shows its first page and the rest on request, in the page's one scroll.
        column = lane(page, ACME).locator('.column[data-status="open"]')
        await expect(column.locator(".count")).to_have_text("55")  # counted on: not "50+"
        await expect(column.locator("article.card")).to_have_count(50)
        scrolls = await column.locator(".cards").evaluate("c => c.scrollHeight > c.clientHeight")
        assert scrolls is False, "a column scrolls on its own"
        await column.locator("button.more").click()
        await expect(column.locator("article.card")).to_have_count(55)
        await expect(column.locator(".count")).to_have_text("55")
        await expect(column.locator("button.more")).to_have_count(0)
        assert errors == []
    # The bridge is gone: the page says its board is the last read, not a live one.
    await expect(page.locator("#live")).to_have_attribute("data-state", "down", timeout=8000)
    await expect(page.locator("#paused")).to_contain_text("Live updates are paused")
    await expect(page.locator("body")).to_have_attribute("data-live", "false")
