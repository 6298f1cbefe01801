"""What the fake GitHub's own tests share: where it lives, its pinned start, and a reader of
listing pages."""

from __future__ import annotations

import httpx

REPO = "octo-org/hello-world"
ISSUES = f"/repos/{REPO}/issues"
START = "2026-03-01T12:00:00Z"


def numbers(response: httpx.Response) -> list[int]:
    return [item["number"] for item in response.json()]
