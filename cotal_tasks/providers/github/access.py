"""What a GitHub token may do on the repository: ``GET /repos/{owner}/{repo}`` answers the
caller's ``permissions`` (a classic token its user's, a fine-grained token what it was
given); ``push`` is what write-back needs (``triage`` labels and closes, but does not
edit an issue's title or body)."""

from __future__ import annotations

from typing import Any

from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.provider import Access


async def access(config: GitHubConfig, http: TrackerHttp) -> Access:
    body: Any = (await http.request("GET", f"repos/{config.routed}")).json()
    permissions = body.get("permissions") if isinstance(body, dict) else None
    if not isinstance(permissions, dict):
        return Access(None, f"GitHub did not say what the token may do on {config.routed}")
    granted = sorted(key for key, value in permissions.items() if value is True)
    writes = permissions.get("push") is True
    return Access(
        writes,
        f"permissions on {config.routed}: {', '.join(granted) or 'none'}",
        "Give the token write access to the repository (a fine-grained token: Issues read "
        "and write; a classic token: the repo scope and a user with push access)",
    )
