"""GitLab issues as a provider: everything GitLab-specific lives here.

The settings (``config``), the REST client (``client``), the pure mapping of GitLab's
JSON (``mapping``), the ``Tracker`` (``tracker``), the webhook route (``webhook``), and
the registry entry ``PROVIDER``, whose ``build`` the composition root calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from cotal_tasks.providers.gitlab.access import access
from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.group import PROJECTS, GitLabGroupTracker
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.gitlab.webhook import SCHEME
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan
from cotal_tasks.providers.provider import BuildContext

log = logging.getLogger(__name__)
RESOLVE_S = 10.0

__all__ = ["PROVIDER", "GitLabConfig", "open_tracker"]


def open_tracker(config: GitLabConfig, boundary: ItemBoundary) -> tuple[GitLabTracker, TrackerHttp]:
    """The tracker over the first project (``sibling`` gives the others); its HTTP client,
    shared by every project of the endpoint, is the caller's to close."""
    http = assemble.tracker_http(config, "GitLab", gitlab_http_client, gitlab_retry)
    if config.group is not None:
        group = GitLabClient(http, config.group, kind="groups")
        return GitLabGroupTracker(group, config, boundary), http
    client = GitLabClient(http, config.location, config.pagination)
    return GitLabTracker(client, config, boundary), http


def write_plan(config: GitLabConfig) -> WritePlan:
    return WritePlan(config.status_labels())


async def prepare(tracker: GitLabTracker, config: GitLabConfig, ctx: BuildContext) -> None:
    """What the tracker must know before the endpoint serves: a group source, the paths
    its projects' tasks carry (kept in its checkpoint, so a write before the first poll
    finds its issue); a numeric project, its path (``resolve_path``)."""
    if isinstance(tracker, GitLabGroupTracker):
        checkpoints = assemble.sql_mirror(ctx.mirror).checkpoints()
        saved = await checkpoints.load(f"gitlab:{config.location}") or {}
        tracker.know(saved.get(PROJECTS))
        return
    await resolve_path(tracker, config, ctx)


async def resolve_path(tracker: GitLabTracker, config: GitLabConfig, ctx: BuildContext) -> None:
    """A numeric ``project``'s path (its tasks are named by it), known before any issue is
    read: asked of GitLab now (so a renamed project is named as it is now) and kept in the
    mirror's checkpoints, which answers when GitLab does not (it is down, or refuses). Unknown
    on a first start GitLab does not answer: the first issue read names it."""
    if tracker.path_known:
        return
    checkpoints = assemble.sql_mirror(ctx.mirror).checkpoints()
    key = f"gitlab-project:{config.api_url}:{config.location}"
    saved = (await checkpoints.load(key) or {}).get("path")
    path = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(RESOLVE_S):  # a GitLab that is down delays no start
            path = await tracker.client.project_path(int(config.location))
    if path is not None and path != saved:
        await checkpoints.save(key, {"path": path}, ctx.clock())
    path = path or (saved if isinstance(saved, str) and saved else None)
    if path is None:
        log.warning(
            "%s: GitLab did not answer project %s's path; its tasks are writable once an "
            "issue of it has been read",
            ctx.name,
            config.location,
        )
        return
    tracker.name_path(path)


PROVIDER = assemble.provider(
    "gitlab",
    GitLabConfig,
    open_tracker,
    plan=write_plan,
    scheme=SCHEME,
    access=access,
    prepare=prepare,
)
