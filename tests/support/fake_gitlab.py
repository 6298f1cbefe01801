"""A fake GitLab REST API (v4) for tests of the GitLab provider: in-memory state, an ASGI
app under ``/api/v4`` with GitLab's documented list/pagination (offset and keyset),
rate-limit and error behaviour, a loopback server and webhook helpers.

    fake = FakeGitLab()
    fake.bulk_issues("acme/widgets", 250)
    async with serve_fake_gitlab(fake) as api_url:  # http://127.0.0.1:PORT/api/v4
        ...  # httpx.AsyncClient(base_url=api_url, headers=fake.auth_headers())

or, without a socket: ``fake.client()`` (an ``httpx.AsyncClient`` on
``httpx.ASGITransport(app=fake.app)`` with base URL ``http://fake-gitlab/api/v4``).
"""

from __future__ import annotations

from tests.support.clock import FakeClock, parse_iso
from tests.support.fake_gitlab_app import create_app
from tests.support.fake_gitlab_context import API_PREFIX
from tests.support.fake_gitlab_model import hook_time, iso
from tests.support.fake_gitlab_state import FakeGitLab
from tests.support.fake_gitlab_webhooks import (
    DEFAULT_WEBHOOK_UUID,
    gitlab_webhook,
    issue_hook_payload,
    merge_request_hook_payload,
    note_hook_payload,
)
from tests.support.fake_tracker import RecordedRequest, serve_on_loopback

__all__ = [
    "API_PREFIX",
    "DEFAULT_WEBHOOK_UUID",
    "FakeClock",
    "FakeGitLab",
    "RecordedRequest",
    "create_app",
    "gitlab_webhook",
    "hook_time",
    "iso",
    "issue_hook_payload",
    "merge_request_hook_payload",
    "note_hook_payload",
    "parse_iso",
    "serve_fake_gitlab",
]


# Serves on a free loopback port and yields the API base URL
# (``http://127.0.0.1:PORT/api/v4``; see ``serve_on_loopback``).
serve_fake_gitlab = serve_on_loopback
