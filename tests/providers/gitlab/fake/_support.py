"""What the fake GitLab's own tests share: where it lives, its pinned start, and a reader of
listing pages."""

from __future__ import annotations

import httpx

PROJECT = "acme/widgets"
ENCODED = "acme%2Fwidgets"
ISSUES = f"/projects/{ENCODED}/issues"
START = "2026-11-30T06:43:14.123Z"


def iids(response: httpx.Response) -> list[int]:
    return [item["iid"] for item in response.json()]
