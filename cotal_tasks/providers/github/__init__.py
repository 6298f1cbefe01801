"""GitHub issues as a provider: everything GitHub-specific lives here.

The settings (``config``), the REST and GraphQL client (``client``), the pure mapping of
GitHub's JSON (``mapping``, ``evidence``, ``walk``), the ``Tracker`` (``tracker``), the
webhook route (``webhook``), and the registry entry ``PROVIDER``, whose ``build`` the
composition root calls.
"""

from __future__ import annotations

from cotal_tasks.providers.github.access import access
from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.github.config import CLOSE_REASONS, GitHubConfig
from cotal_tasks.providers.github.discovery import discovery
from cotal_tasks.providers.github.tracker import GitHubTracker
from cotal_tasks.providers.github.webhook import SCHEME
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan

__all__ = ["PROVIDER", "GitHubConfig", "open_tracker"]


def open_tracker(config: GitHubConfig, boundary: ItemBoundary) -> tuple[GitHubTracker, TrackerHttp]:
    """The tracker over the first repository (``sibling`` gives the others; for an
    organization or installation, every repository: this one names no repository); its
    HTTP client, shared by every repository of the endpoint, is the caller's to close."""
    http = assemble.tracker_http(config, "GitHub", github_http_client, github_retry)
    http.allow_origin(config.graphql_endpoint())
    repo = config.location
    return GitHubTracker(GitHubClient(http, repo), config, boundary, repo), http


def write_plan(config: GitHubConfig) -> WritePlan:
    return WritePlan(config.status_labels(), reasons=CLOSE_REASONS)


PROVIDER = assemble.provider(
    "github",
    GitHubConfig,
    open_tracker,
    plan=write_plan,
    scheme=SCHEME,
    access=access,
    discover=discovery,
)
