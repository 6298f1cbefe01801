"""A delivery no secret verifies is no longer silent: the bridge answers 401 and leaves a
warning naming the route, the sender and the reason (never the body or a secret), at
most one line a minute however many arrive, and ``/healthz`` (to a reader) shows the count
and the latest refusal for the endpoints of that route."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.http.refusals import LOG_EVERY_S, RefusedDeliveries
from tests.bridge.http._support import READER_ENV, TOKENS, bearer, open_http_mesh, set_secrets
from tests.providers.github._support import (
    ENDPOINT_NAME,
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    github_config,
)
from tests.support.fake_github import FakeGitHub, issues_payload, signed_webhook

WRONG_SECRET = "a webhook secret this bridge never had"
MARKER = "body-text-that-must-not-reach-the-log"


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "webhook: refused" in r.getMessage()]


async def test_a_refused_delivery_is_logged_and_shows_on_healthz(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    set_secrets(monkeypatch)
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    caplog.set_level(logging.INFO, logger="cotal_tasks")
    fake.add_issue(REPO, "First")
    settings = github_config(github_url, poll_interval_s=3600, webhook_secret_env=SECRET_ENV)
    async with open_http_mesh(
        tmp_path, names=(ENDPOINT_NAME,), tokens=TOKENS, local_reader=False, settings=settings
    ) as mesh:
        reader = bearer(READER_ENV)
        before = (await mesh.get("/healthz", headers=reader)).json()
        payload = issues_payload(fake, "closed", REPO, 1)
        payload["comment"] = MARKER
        body, headers = signed_webhook(WRONG_SECRET, "issues", payload)
        async with httpx.AsyncClient(base_url=mesh.url) as http:
            answers = [
                (await http.post("/webhooks/github", content=body, headers=headers)).status_code
                for _ in range(12)
            ]
        after = (await mesh.get("/healthz", headers=reader)).json()
        tokenless = (await mesh.get("/healthz")).json()

    assert answers == [401] * 12
    assert before["endpoints"][ENDPOINT_NAME]["webhooks"] == {"refused": 0}
    hooks = after["endpoints"][ENDPOINT_NAME]["webhooks"]
    assert hooks["refused"] == 12
    assert hooks["lastRefusedAt"] > 1.7e12
    assert hooks["lastRefusal"].startswith("the X-Hub-Signature-256 signature does not match")
    assert tokenless["endpoints"] == {ENDPOINT_NAME: {"ready": True}}  # no details to anyone
    [line] = refusal_lines(caplog)  # twelve refusals, one line: a flood cannot fill the log
    assert line.startswith("github webhook: refused a delivery from 127.0.0.1 (401, 1 since")
    assert "Set the webhook secret" in line
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for kept_out in (WEBHOOK_SECRET, WRONG_SECRET, MARKER, headers["X-Hub-Signature-256"]):
        assert kept_out not in logged


def test_a_flood_writes_one_line_a_minute_counting_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="cotal_tasks.bridge.http.refusals")
    now = [1000.0]
    record = RefusedDeliveries("gitlab", clock=lambda: now[0], wall_ms=lambda: 5)
    for _ in range(50):
        record.refused("10.0.0.9", "the X-Gitlab-Token does not match. Set it")
        now[0] += 1
    assert len(refusal_lines(caplog)) == 1
    now[0] += LOG_EVERY_S
    record.refused("10.0.0.9", "the X-Gitlab-Token does not match. Set it")
    first, second = refusal_lines(caplog)
    assert "(401, 1 since start)" in first
    assert "(401, 51 since start; 49 more refused since the last line)" in second
    assert record.to_json() == {
        "refused": 51,
        "lastRefusedAt": 5,
        "lastRefusal": "the X-Gitlab-Token does not match. Set it",
    }
