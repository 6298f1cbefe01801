"""The dashboard's view of an endpoint over several repositories, in headless Chromium
(skipped without it, as ``test_dashboard_browser`` says): a card links to the issue page
of the repository its task id names, the source filter keeps the cards of one repository,
and the filter is offered only when an endpoint reads several."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from tests.bridge.http._browser import chromium, open_page
from tests.bridge.http._support import open_http_mesh

if TYPE_CHECKING:
    from playwright.async_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]
SOURCES = """async () => {
  const { matches, trackerRef } = await import('/static/render.js');
  const endpoint = {
    provider: 'github', taskLink: 'https://github.com/{path}/issues/{number}',
    sources: ['acme/widgets', 'acme/gadgets'] };
  const widget = { taskId: 'acme/widgets#3', title: 'A widget' };
  const gadget = { taskId: 'acme/gadgets#3', title: 'A gadget' };
  const only = (source) => [widget, gadget]
    .filter((task) => matches(task, { source, seat: '', text: '' }))
    .map((task) => task.taskId);
  return {
    links: [trackerRef(widget, endpoint).href, trackerRef(gadget, endpoint).href],
    gadgets: only('acme/gadgets'),
    every: only(''),
    prefix: only('acme/gadget'),
  };
}"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def test_cards_of_several_repositories_link_and_filter_by_source(
    tmp_path: Path, browser: Browser
) -> None:
    from playwright.async_api import expect

    async with open_http_mesh(tmp_path) as mesh:
        page, errors = await open_page(browser, mesh.url + "/")
        seen = await page.evaluate(SOURCES)
        assert seen == {
            "links": [
                "https://github.com/acme/widgets/issues/3",
                "https://github.com/acme/gadgets/issues/3",
            ],
            "gadgets": ["acme/gadgets#3"],
            "every": ["acme/widgets#3", "acme/gadgets#3"],
            "prefix": [],  # a source is a whole repository, never a prefix of one
        }
        # The boards here read one source each: no source filter is offered.
        await expect(page.locator("#f-source-label")).to_be_hidden()
        assert errors == []
