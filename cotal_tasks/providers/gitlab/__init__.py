"""GitLab issues as a provider: everything GitLab-specific lives here.

The settings (``config``), the REST client (``client``), the pure mapping of GitLab's
JSON (``mapping``), the ``Tracker`` (``tracker``), the webhook route (``webhook``), and
``build``, which the composition root calls through the registry.
"""

from __future__ import annotations

from cotal_tasks.core import Task
from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.gitlab.webhook import WEBHOOK
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan, status_labels
from cotal_tasks.providers.provider import BuildContext, Built, Provider

__all__ = ["PROVIDER", "GitLabConfig", "build", "open_tracker"]


def open_tracker(config: GitLabConfig) -> tuple[GitLabTracker, TrackerHttp]:
    """The tracker over the project (its HTTP client is the caller's to close)."""
    http = assemble.tracker_http(config, "GitLab", gitlab_http_client, gitlab_retry)
    client = GitLabClient(http, config.project, config.pagination)
    return GitLabTracker(client, config), http


async def build(config: GitLabConfig, ctx: BuildContext) -> Built:
    tracker, http = open_tracker(config)
    # GitLab keeps no close reason: the dropped label says "dropped".
    labels = status_labels(
        claimed=config.claimed_label, blocked=config.blocked_label, dropped=config.dropped_label
    )
    plan = WritePlan(labels)
    key = f"gitlab:{config.project}"
    return assemble.assemble(ctx, tracker, config, http, plan=plan, key=key, path=config.project)


async def preview(config: GitLabConfig, space: str, count: int) -> list[tuple[int, Task]]:
    tracker, http = open_tracker(config)
    return await assemble.preview(tracker, config, http, space=space, count=count)


PROVIDER = Provider(
    "gitlab",
    GitLabConfig,
    build,
    section="gitlab",
    webhook=WEBHOOK,
    describe=lambda config: assemble.describe("gitlab", config),
    preview=preview,
)
