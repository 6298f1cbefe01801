"""The dashboard as a person reads it, in headless Chromium over a bridge syncing the fake
GitHub (125 issues): the lane counts its tasks ("125 tasks"), a card's three-digit link
and its tracker state both whole, a brief's lines, why an issue assigned to a seat's
account shows no seat, plain words in the detail with the raw identifiers tucked away, a
not-found panel that speaks to a person, evidence counted in words ("2 branches"), the
7-day axis naming every day, the legend in the columns' order, and the sync panel's
refused webhook deliveries. Screenshots at 1400 and 360 px go to
``test-artifacts/dashboard/``."""

from __future__ import annotations

import datetime
import itertools
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest
import pytest_asyncio

from cotal_tasks.core import StaleMarker
from tests.bridge.http._browser import (
    STATUSES,
    card,
    chromium,
    lane,
    open_page,
    serious_violations,
    shoot,
)
from tests.bridge.http._support import ACME, make_stale, open_http_mesh
from tests.providers.github._support import (
    ENDPOINT_NAME,
    HUMAN,
    REPO,
    SEAT_LOGIN,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    github_config,
    task_id,
)
from tests.providers.hosted_support import add_issues
from tests.support.fake_github import FakeGitHub, issues_payload, serve_fake_github, signed_webhook
from tests.support.polling import eventually

if TYPE_CHECKING:
    from playwright.async_api import Browser, Locator, Page

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

BODY = "Steps to reproduce:\n\n1. open 7\n2. see it fail"
# The card's layout: is the tracker state cut, is the link cut, do the two overlap.
LAYOUT = """card => {
  const ref = card.querySelector('.card-meta .ref');
  const icon = ref.querySelector('svg');
  const source = card.querySelector('.source');
  const a = icon.getBoundingClientRect();
  const b = source.getBoundingClientRect();
  const r = ref.getBoundingClientRect();
  return {
    sourceCut: source.scrollWidth > source.clientWidth + 1,
    refCut: ref.scrollWidth > ref.clientWidth + 1,
    iconOutside: a.right > r.right + 0.5,
    overlap: !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top),
  };
}"""
EVIDENCE_WORDS = """async () => {
  const { evidenceCounts } = await import('/static/render.js');
  const box = evidenceCounts([{ kind: 'branch' }, { kind: 'branch' }, { kind: 'commit' }]);
  return box.getAttribute('aria-label');
}"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def card_layout(found: Locator) -> dict[str, bool]:
    layout: dict[str, bool] = await found.evaluate(LAYOUT)
    return layout


async def open_detail(page: Page, url: str, task: str) -> Locator:
    from playwright.async_api import expect

    await page.goto(f"{url}/#task={quote(ENDPOINT_NAME + '/' + task, safe='')}")
    await page.reload()  # a fragment change alone keeps the page; a fresh read of the link
    detail = page.locator("#detail")
    await expect(detail).to_have_attribute("data-state", re.compile("current|error"))
    return detail


async def test_the_board_and_detail_read_as_a_person_reads(
    tmp_path: Path, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    fake = FakeGitHub(assignable=[SEAT_LOGIN, HUMAN])
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    add_issues(fake, REPO, 121)
    fake.add_issue(REPO, "It fails on 7", BODY)  # 122
    fake.add_issue(REPO, "Not doing this", state="closed", state_reason="not_planned")  # 123
    fake.add_issue(REPO, "Assigned to the seat's account", assignees=[SEAT_LOGIN])  # 124
    fake.add_issue(REPO, "Shipped", state="closed", state_reason="completed")  # 125
    async with serve_fake_github(fake) as github_url:
        settings = github_config(github_url, poll_interval_s=3600, webhook_secret_env=SECRET_ENV)
        async with open_http_mesh(tmp_path, names=(ENDPOINT_NAME,), settings=settings) as mesh:

            async def synced() -> bool:
                health = (await mesh.get("/healthz")).json()
                return "lastSync" in health["endpoints"][ENDPOINT_NAME]

            await eventually(synced, 30, what="the first sync")
            body, headers = signed_webhook(
                "a secret this bridge never had", "issues", issues_payload(fake, "edited", REPO, 1)
            )
            async with httpx.AsyncClient(base_url=mesh.url) as http:
                refused = await http.post("/webhooks/github", content=body, headers=headers)
            assert refused.status_code == 401

            page, errors = await open_page(browser, mesh.url)
            github = lane(page, ENDPOINT_NAME)
            # The lane counts the board, not the cards read: 125, not "99+".
            await expect(github.locator(".lane-head .muted").first).to_have_text("125 tasks")
            await expect(github.locator('.column[data-status="open"] .count')).to_have_text("123")
            await expect(github.locator('.column[data-status="open"] article.card')).to_have_count(
                50
            )
            # A three-digit link and "closed/not_planned" both whole, and apart.
            dropped = card(page, ENDPOINT_NAME, "dropped", task_id(123))
            await expect(dropped.locator(".source")).to_have_text("closed/not_planned")
            assert await card_layout(dropped) == {
                "sourceCut": False,
                "refCut": False,
                "iconOutside": False,
                "overlap": False,
            }
            assert await page.evaluate(EVIDENCE_WORDS) == "Evidence: 2 branches, 1 commit"
            await shoot(page, "reading-board-1400.png")

            # The brief keeps its lines; plain words, the raw identifiers under a summary.
            detail = await open_detail(page, mesh.url, task_id(122))
            await expect(detail.locator("#detail-title")).to_have_text("It fails on 7")
            assert await detail.locator(".brief").inner_text() == BODY
            top = await detail.locator("dl.facts").first.inner_text()
            assert "ai.cotal.tasks.task/v1" not in top
            assert "Lifecycle uid" not in top
            raw = detail.locator("details.raw")
            await raw.locator("summary").click()
            await expect(raw).to_contain_text("ai.cotal.tasks.task/v1")
            await shoot(page, "reading-detail-brief-1400.png")

            # Assigned on GitHub to a seat's account, unbound here: the detail says why.
            detail = await open_detail(page, mesh.url, task_id(124))
            await expect(detail.locator(".why-unbound")).to_contain_text(
                "the account is a seat's, but no lifecycle of that seat is known until the "
                "seat claims the task or is bound to it"
            )
            assert await serious_violations(page) == []
            await shoot(page, "reading-detail-unbound-1400.png")
            await shoot(page, "reading-detail-unbound-360.png", width=360)
            await page.set_viewport_size({"width": 1400, "height": 900})

            # A link to a task the endpoint does not have speaks to a person.
            detail = await open_detail(page, mesh.url, f"{REPO}#999")
            banner = detail.locator(".banner")
            await expect(banner).to_contain_text(f"{ENDPOINT_NAME} has no task {REPO}#999")
            assert "list-tasks" not in await banner.inner_text()
            await page.keyboard.press("Escape")

            # The card at a phone's width: still whole.
            await page.set_viewport_size({"width": 360, "height": 900})
            await page.wait_for_timeout(400)
            assert await card_layout(dropped) == {
                "sourceCut": False,
                "refCut": False,
                "iconOutside": False,
                "overlap": False,
            }
            await shoot(page, "reading-board-360.png", width=360)

            # The flow view: every day of the week named, the legend in column order, and
            # the refused delivery in the sync panel.
            await page.set_viewport_size({"width": 1400, "height": 900})
            await page.click("#view-flow")
            flow = page.locator(f'#flow section[data-endpoint="{ENDPOINT_NAME}"]')
            await flow.locator('button[data-window="7d"]').click()
            for width in (1400, 360):
                await page.set_viewport_size({"width": width, "height": 900})
                await page.wait_for_timeout(400)
                days = await flow.locator("svg text.axis.day").evaluate_all(
                    "labels => labels.map(label => label.dataset.day)"
                )
                shown = [datetime.date.fromisoformat(day) for day in days]
                assert len(shown) >= 6, days
                steps = [(b - a).days for a, b in itertools.pairwise(shown)]
                assert steps == [1] * (len(shown) - 1), days  # consecutive: no day missing
                today = datetime.date.fromtimestamp(time.time())
                assert today - shown[-1] <= datetime.timedelta(days=1)
                await shoot(page, f"reading-flow-{width}.png", width=width)
            await page.set_viewport_size({"width": 1400, "height": 900})
            legend = await flow.locator(".legend li").evaluate_all(
                "items => items.map(item => item.dataset.status)"
            )
            assert legend == list(STATUSES)
            assert await serious_violations(page) == []
            sync = page.locator(f'#flow .sync-tile[data-endpoint="{ENDPOINT_NAME}"]')
            await expect(sync.locator('[data-fact="webhooks-refused"]')).to_contain_text(
                "1 delivery since the bridge started (no secret verifies them); the last"
            )
            await expect(sync.locator('[data-fact="webhooks-refused"]')).to_contain_text(
                "the X-Hub-Signature-256 signature does not match"
            )
            assert errors == []


async def test_a_stale_endpoint_never_says_since_never(tmp_path: Path, browser: Browser) -> None:
    from playwright.async_api import expect

    async with open_http_mesh(tmp_path, names=(ACME,)) as mesh:
        make_stale(mesh, ACME, StaleMarker(staleAsOf=0, reason="the first sync has not run"))
        page, errors = await open_page(browser, f"{mesh.url}/#view=flow")
        sync = page.locator(f'#flow .sync-tile[data-endpoint="{ACME}"]')
        stale = sync.locator('[data-fact="stale"]')
        await expect(stale).to_have_text("the first sync has not run. No read has succeeded yet.")
        assert "never" not in (await sync.inner_text()).lower()
        assert errors == []
