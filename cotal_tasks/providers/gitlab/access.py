"""What a GitLab token may do in the project: ``GET /projects/:id`` answers the caller's
``permissions.project_access`` and ``group_access`` levels; Developer (30) and above may
edit, assign and close issues, which write-back needs."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.provider import Access

DEVELOPER = 30
_ROLES = {
    10: "Guest",
    15: "Planner",
    20: "Reporter",
    30: "Developer",
    40: "Maintainer",
    50: "Owner",
}


async def access(config: GitLabConfig, http: TrackerHttp) -> Access:
    """The token's role in the routed project (a group's: ``create_project``; a group
    without one says only that each project's writes are checked as they are made)."""
    project = config.create_project if config.group is not None else config.routed
    if project is None:
        return Access(
            None,
            f"group {config.group} names no create_project; write access is each project's, "
            "answered as each write is made",
        )
    path = f"projects/{quote(project, safe='')}"
    body: Any = (await http.request("GET", path)).json()
    permissions = body.get("permissions") if isinstance(body, dict) else None
    if not isinstance(permissions, dict):
        return Access(None, f"GitLab did not say what the token may do in {project}")
    levels: list[int] = []
    for grant in (permissions.get("project_access"), permissions.get("group_access")):
        if isinstance(grant, dict) and isinstance(grant.get("access_level"), int):
            levels.append(grant["access_level"])
    level = max(levels, default=0)
    role = _ROLES.get(level, f"access level {level}") if level else "no role"
    return Access(
        level >= DEVELOPER,
        f"{role} in {project}",
        "Give the token's user the Developer role (or above) in the project, and the token "
        "the api scope",
    )
