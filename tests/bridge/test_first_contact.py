"""``serve``'s first contact with a tracker is what the docs say: one listing request,
nothing else. Before, it was the preview of one item: the listing, then that issue read
again on its own and its evidence asked (GitHub's GraphQL; GitLab's related merge
requests and notes; Jira's remote links), three requests or more where one is documented.
Against each tracker's loopback fake, with issues on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cotal_tasks.bridge.config import BridgeConfig, HttpConfig
from cotal_tasks.bridge.process.trackers import first_contact
from tests.support.trackers import Side


async def test_the_first_contact_is_one_listing_request(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    side, fake = tracker_side, tracker_fake
    for n in range(3):
        side.add_issue(fake, f"Issue {n}", "Steps to reproduce")
    endpoint = side.tracker.endpoint(tracker_url)
    config = BridgeConfig(data_dir=tmp_path, http=HttpConfig(enabled=False), endpoints=(endpoint,))
    before = len(fake.requests)
    assert await first_contact(config, endpoint) == 1
    sent = [(r.method, r.path) for r in fake.requests[before:]]
    assert len(sent) == 1, sent
    method, path = side.listing
    assert sent[0][0] == method
    assert sent[0][1].endswith(path) or path in sent[0][1], sent
