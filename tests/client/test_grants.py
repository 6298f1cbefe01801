"""A broker that refuses the publish: the client says permission-denied at once, it does
not wait out its deadline and call it silence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.bridge.wire.grants import caller_rows
from cotal_tasks.client import ErrorCode, Seat, TasksClient, TasksError
from tests.conformance.permissioned import seat_on_a_permissioned_bridge
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE


@asynccontextmanager
async def connected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: Seat, rows: dict[str, Any]
) -> AsyncIterator[TasksClient]:
    """A broker whose seat user holds ``rows`` (and an operator ``tasks.write``), a bridge
    serving on it, and ``worker`` connected as that seat user."""
    async with (
        seat_on_a_permissioned_bridge(tmp_path, monkeypatch, rows) as url,
        TasksClient.connect(url, SPACE, ENDPOINT, seat=worker, timeout=60) as tasks,
    ):
        yield tasks


async def test_a_refused_publish_is_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = seat("worker", 6)
    rows = caller_rows(SPACE, ENDPOINT, worker, ["tasks.self"]).as_nats()
    async with connected(tmp_path, monkeypatch, worker, rows) as tasks:
        assert (await tasks.my_tasks()).tasks == ()  # granted: tasks.self
        with pytest.raises(TasksError) as denied:
            await tasks.list_tasks()  # tasks.read is not granted
        assert (denied.value.code, denied.value.outcome) == (
            ErrorCode.PERMISSION_DENIED,
            "not-executed",
        )
        assert denied.value.reply is None
        assert "broker refused" in denied.value.message
        # The connection survives the refusal.
        assert (await tasks.my_tasks()).tasks == ()


async def test_a_refused_reply_subscription_is_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential that may send but not read its reply rail: refused at once as
    permission-denied, not heard as silence."""
    worker = seat("worker", 7)
    rows = caller_rows(SPACE, ENDPOINT, worker, ["tasks.self", "tasks.read"]).as_nats()
    rows["subscribe"]["allow"] = [s for s in rows["subscribe"]["allow"] if ".reply." not in s]
    async with connected(tmp_path, monkeypatch, worker, rows) as tasks:
        with pytest.raises(TasksError) as denied:
            await tasks.describe()
        assert (denied.value.code, denied.value.outcome) == (
            ErrorCode.PERMISSION_DENIED,
            "not-executed",
        )
        assert "reply subscription" in denied.value.message
