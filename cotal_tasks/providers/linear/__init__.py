"""Linear issues as a provider: everything Linear-specific lives here.

The settings (``config``), the GraphQL client (``client``) and its documents
(``queries``), the pure mapping of Linear's JSON (``mapping``), the ``Tracker``
(``tracker``) and its writes (``workflow``), the webhook route (``webhook``), and the
registry entry ``PROVIDER``, whose ``build`` the composition root calls.
"""

from __future__ import annotations

from functools import partial

from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.writeback import WritePlan, status_labels
from cotal_tasks.providers.linear.access import access
from cotal_tasks.providers.linear.client import LinearClient, linear_http_client, linear_wait
from cotal_tasks.providers.linear.config import LinearConfig
from cotal_tasks.providers.linear.mapping import STARTED
from cotal_tasks.providers.linear.tracker import LinearTracker
from cotal_tasks.providers.linear.webhook import SCHEME

__all__ = ["PROVIDER", "LinearConfig", "open_tracker"]


def open_tracker(config: LinearConfig, boundary: ItemBoundary) -> tuple[LinearTracker, TrackerHttp]:
    """The tracker over the first team, its siblings over the others (``sibling``); its
    HTTP client is the caller's to close."""
    make = partial(linear_http_client, oauth=config.auth == "oauth")
    http = assemble.tracker_http(config, "Linear", make, linear_wait)
    return LinearTracker(LinearClient(http, config.api_url), config, boundary), http


def write_plan(config: LinearConfig) -> WritePlan:
    # A claim is a started workflow state, which the plan marks like a label (never sent
    # as one); done and dropped move to a completed or canceled state.
    return WritePlan(
        status_labels(claimed=STARTED, blocked=config.blocked_label),
        reasons={"done": "completed", "dropped": "canceled"},
    )


PROVIDER = assemble.provider(
    "linear", LinearConfig, open_tracker, plan=write_plan, scheme=SCHEME, access=access
)
