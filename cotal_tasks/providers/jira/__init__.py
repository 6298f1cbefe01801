"""Jira Cloud issues as a provider: everything Jira-specific lives here.

The settings (``config``), the REST client (``client``), the pure mapping of Jira's JSON
(``mapping``, ``adf``), the ``Tracker`` (``tracker``) and its workflow writes
(``workflow``), the webhook route (``webhook``), and the registry entry ``PROVIDER``,
whose ``build`` the composition root calls.
"""

from __future__ import annotations

from functools import partial

from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan, status_labels
from cotal_tasks.providers.jira.access import access
from cotal_tasks.providers.jira.client import JiraClient, JiraRetry, jira_http_client
from cotal_tasks.providers.jira.config import JiraConfig
from cotal_tasks.providers.jira.mapping import IN_PROGRESS
from cotal_tasks.providers.jira.tracker import JiraTracker
from cotal_tasks.providers.jira.webhook import SCHEME

__all__ = ["PROVIDER", "JiraConfig", "open_tracker"]


def open_tracker(config: JiraConfig, boundary: ItemBoundary) -> tuple[JiraTracker, TrackerHttp]:
    """The tracker over the project (its HTTP client is the caller's to close)."""
    email = config.email if config.auth == "basic" else None
    make = partial(jira_http_client, email=email)
    http = assemble.tracker_http(config, "Jira", make, JiraRetry())
    return JiraTracker(JiraClient(http, config.location, config.page_size), config, boundary), http


def write_plan(config: JiraConfig) -> WritePlan:
    # A claim is a workflow status, which the plan marks like a label (never sent as
    # one); done and dropped close with the configured resolution.
    return WritePlan(
        status_labels(claimed=IN_PROGRESS, blocked=config.blocked_label),
        reasons={"done": config.done_resolution, "dropped": config.dropped_resolution},
    )


PROVIDER = assemble.provider(
    "jira", JiraConfig, open_tracker, plan=write_plan, scheme=SCHEME, access=access
)
