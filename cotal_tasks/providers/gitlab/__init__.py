"""GitLab issues as a provider: everything GitLab-specific lives here.

The settings (``config``), the REST client (``client``), the pure mapping of GitLab's
JSON (``mapping``), the ``Tracker`` (``tracker``), the webhook route (``webhook``), and
the registry entry ``PROVIDER``, whose ``build`` the composition root calls.
"""

from __future__ import annotations

from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.gitlab.webhook import WEBHOOK
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan

__all__ = ["PROVIDER", "GitLabConfig", "open_tracker"]


def open_tracker(config: GitLabConfig) -> tuple[GitLabTracker, TrackerHttp]:
    """The tracker over the project (its HTTP client is the caller's to close)."""
    http = assemble.tracker_http(config, "GitLab", gitlab_http_client, gitlab_retry)
    client = GitLabClient(http, config.project, config.pagination)
    return GitLabTracker(client, config), http


def write_plan(config: GitLabConfig) -> WritePlan:
    return WritePlan(config.status_labels())


PROVIDER = assemble.provider("gitlab", GitLabConfig, open_tracker, plan=write_plan, webhook=WEBHOOK)
