"""No secret in what a stranger can read: a tokenless ``/healthz`` says ready or not per
endpoint and nothing else (details need a token), and URLs in errors and logs carry no
credentials. A real listener, a real broker connection refused."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from cotal_tasks.client import TasksClient, TasksError
from cotal_tasks.core.masking import mask_credentials
from tests.bridge.http._support import (
    ACME,
    OPS,
    READER_ENV,
    TOKENS,
    bearer,
    damage_board,
    open_http_mesh,
    set_secrets,
)
from tests.conftest import seat

PASSWORD = "hunter2-" + "p" * 20


async def test_a_tokenless_healthz_says_ready_or_not_and_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: it showed absolute paths and the store's (or tracker's) error text."""
    set_secrets(monkeypatch)
    async with open_http_mesh(tmp_path, names=(ACME, OPS), tokens=TOKENS) as mesh:
        await damage_board(mesh, OPS)

        brief = await mesh.get("/healthz")
        detailed = await mesh.get("/healthz", headers=bearer(READER_ENV))
        wrong = await mesh.get("/healthz", headers={"Authorization": "Bearer not-a-token-at-all"})

    assert brief.status_code == detailed.status_code == 503
    assert brief.json() == {
        "status": "degraded",
        "live": True,
        "endpoints": {ACME: {"ready": True}, OPS: {"ready": False}},
    }
    assert wrong.json() == brief.json()  # an unknown token reads what no token reads
    assert str(tmp_path) not in brief.text
    ops = detailed.json()["endpoints"][OPS]
    assert ops["error"]["code"] == "unavailable"
    assert detailed.json()["broker"] == {"connected": True}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_broker_url_with_a_password_is_masked_in_errors_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: the refusal quoted the URL whole, password included."""
    url = f"nats://worker:{PASSWORD}@127.0.0.1:{closed_port()}"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TasksError) as refused:
        async with TasksClient.connect(url, "demo", ACME, seat=seat("worker", 1), timeout=1):
            pass
    assert PASSWORD not in refused.value.message
    assert PASSWORD not in caplog.text
    assert "nats://***@127.0.0.1" in refused.value.message


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("nats://u:p@h:4222", "nats://***@h:4222"),
        ("nats://a:1@h1:1,nats://b:2@h2:2", "nats://***@h1:1,nats://***@h2:2"),
        ("postgresql://app:s3cret@db/tasks", "postgresql://***@db/tasks"),
        (
            "GET https://gl/api?private_token=abc&page=2",
            "GET https://gl/api?private_token=***&page=2",
        ),
        ("https://h/x?sig=1&X-Amz-Signature=zz", "https://h/x?sig=1&X-Amz-Signature=***"),
        ("no url here: user@example.com", "no url here: user@example.com"),
    ],
)
def test_credentials_in_urls_are_masked(text: str, masked: str) -> None:
    assert mask_credentials(text) == masked
