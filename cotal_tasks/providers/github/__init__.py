"""GitHub issues as a provider: everything GitHub-specific lives here.

The settings (``config``), the REST and GraphQL client (``client``), the pure mapping of
GitHub's JSON (``mapping``, ``evidence``, ``walk``), the ``Tracker`` (``tracker``), the
webhook route (``webhook``), and ``build``, which the composition root calls through the
registry.
"""

from __future__ import annotations

from cotal_tasks.core import Task, TaskStatus
from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.github.tracker import GitHubTracker
from cotal_tasks.providers.github.webhook import WEBHOOK
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan, status_labels
from cotal_tasks.providers.provider import BuildContext, Built, Provider

__all__ = ["PROVIDER", "GitHubConfig", "build", "open_tracker"]

# GitHub keeps a state_reason with the state: why an issue closed, or that it reopened.
CLOSE_REASONS: dict[TaskStatus, str] = {
    "done": "completed",
    "dropped": "not_planned",
    "open": "reopened",
}


def open_tracker(config: GitHubConfig) -> tuple[GitHubTracker, TrackerHttp]:
    """The tracker over the repository (its HTTP client is the caller's to close)."""
    http = assemble.tracker_http(config, "GitHub", github_http_client, github_retry)
    http.allow_origin(config.graphql_endpoint())
    return GitHubTracker(GitHubClient(http, config.repository), config), http


async def build(config: GitHubConfig, ctx: BuildContext) -> Built:
    tracker, http = open_tracker(config)
    labels = status_labels(claimed=config.claimed_label, blocked=config.blocked_label)
    plan = WritePlan(labels, reasons=CLOSE_REASONS)
    key = f"github:{config.repository}"
    return assemble.assemble(ctx, tracker, config, http, plan=plan, key=key, path=config.repository)


async def preview(config: GitHubConfig, space: str, count: int) -> list[tuple[int, Task]]:
    tracker, http = open_tracker(config)
    return await assemble.preview(tracker, config, http, space=space, count=count)


PROVIDER = Provider(
    "github",
    GitHubConfig,
    build,
    section="github",
    webhook=WEBHOOK,
    describe=lambda config: assemble.describe("github", config),
    preview=preview,
)
