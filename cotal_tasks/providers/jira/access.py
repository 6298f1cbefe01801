"""What a Jira token may do in the project: ``GET /rest/api/3/mypermissions`` answers
whether the caller has each permission write-back needs (edit, assign, transition)."""

from __future__ import annotations

from typing import Any

from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.jira.client import API
from cotal_tasks.providers.jira.config import JiraConfig
from cotal_tasks.providers.provider import Access

NEEDED = ("EDIT_ISSUES", "ASSIGN_ISSUES", "TRANSITION_ISSUES")


async def access(config: JiraConfig, http: TrackerHttp) -> Access:
    params = {"projectKey": config.routed, "permissions": ",".join(NEEDED)}
    body: Any = (await http.request("GET", f"{API}/mypermissions", params=params)).json()
    found = body.get("permissions") if isinstance(body, dict) else None
    if not isinstance(found, dict):
        return Access(None, f"Jira did not say what the token may do in {config.routed}")
    missing = [
        key
        for key in NEEDED
        if not (isinstance(found.get(key), dict) and found[key].get("havePermission") is True)
    ]
    if missing:
        return Access(
            False,
            f"in {config.routed} the token lacks {', '.join(missing)}",
            "Grant the token's user Edit, Assign and Transition Issues in the project's "
            "permission scheme",
        )
    return Access(True, f"in {config.routed} the token has {', '.join(NEEDED)}")
