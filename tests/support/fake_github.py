"""A fake GitHub REST API for tests of the GitHub provider: in-memory state, an ASGI app
with GitHub's documented list/pagination/ETag/rate-limit behaviour, a loopback server and
webhook helpers.

    fake = FakeGitHub()
    fake.bulk_issues("octo-org/hello-world", 250)
    async with serve_fake_github(fake) as base_url:
        ...  # httpx.AsyncClient(base_url=base_url, headers=fake.auth_headers())

or, without a socket: ``httpx.AsyncClient(transport=httpx.ASGITransport(app=fake.app),
base_url="http://fake-github")``.
"""

from __future__ import annotations

from tests.support.clock import FakeClock
from tests.support.fake_github_app import create_app
from tests.support.fake_github_model import iso, parse_iso
from tests.support.fake_github_state import FakeGitHub
from tests.support.fake_github_webhooks import (
    TEST_VECTOR_PAYLOAD,
    TEST_VECTOR_SECRET,
    TEST_VECTOR_SIGNATURE,
    from_organization,
    installation_repositories_payload,
    issue_comment_payload,
    issues_payload,
    ping_payload,
    pull_request_payload,
    push_payload,
    repository_payload,
    sign,
    signed_webhook,
)
from tests.support.fake_tracker import RecordedRequest, serve_on_loopback

__all__ = [
    "TEST_VECTOR_PAYLOAD",
    "TEST_VECTOR_SECRET",
    "TEST_VECTOR_SIGNATURE",
    "FakeClock",
    "FakeGitHub",
    "RecordedRequest",
    "create_app",
    "from_organization",
    "installation_repositories_payload",
    "iso",
    "issue_comment_payload",
    "issues_payload",
    "parse_iso",
    "ping_payload",
    "pull_request_payload",
    "push_payload",
    "repository_payload",
    "serve_fake_github",
    "sign",
    "signed_webhook",
]


# Serves on a free loopback port and yields the base URL (see ``serve_on_loopback``).
serve_fake_github = serve_on_loopback
