"""Replies reach each connection on an inbox prefix of its own: on a real nats-server whose
users hold exactly the rows ``cotal-tasks grants`` prints, a seat works end to end through
the typed client, and another seat can neither subscribe ``_INBOX.>`` nor the first
seat's inbox, so it hears none of its replies nor the bridge's presence reads."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.bridge.wire.grants import bridge_inbox
from cotal_tasks.client import TasksClient
from cotal_tasks.client.subjects import seat_inbox
from tests.conformance.permissioned import (
    Errors,
    grants_rows,
    permission_rows,
    permissioned_bridge_config,
    permissioned_users,
)
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_on, broker, set_up_space
from tests.support.cotal import Space


def inbox_rows(rows: dict[str, dict[str, list[str]]]) -> list[str]:
    return [row for row in rows["subscribe"]["allow"] if row.startswith("_INBOX")]


async def test_a_seat_hears_no_other_connections_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, operator, other = seat("worker", 3), seat("operator", 4), seat("other", 5)
    data_dir = tmp_path / "bridge"
    serve, worker_rows, operator_rows = await permission_rows(tmp_path, data_dir, worker, operator)
    other_rows = await grants_rows(
        tmp_path / "tasks.toml", "--capability", "tasks.self", "--as", str(other)
    )
    # The printed rows say whose inbox each reads, and none reads every inbox.
    assert inbox_rows(worker_rows) == [f"{seat_inbox(worker)}.>"]
    assert inbox_rows(other_rows) == [f"{seat_inbox(other)}.>"]
    assert inbox_rows(serve) == [f"{bridge_inbox(SPACE)}.>"]
    for rows in (serve, worker_rows, operator_rows, other_rows):
        assert "_INBOX.>" not in rows["subscribe"]["allow"]

    passwords, conf = permissioned_users(
        tmp_path, monkeypatch, serve, worker_rows, operator_rows, {"other": other_rows}
    )
    async with broker(tmp_path, config_file=conf) as server:
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = permissioned_bridge_config(server.url, data_dir, EndpointConfig(name=ENDPOINT))
        admin = await nats.connect(server.url, user="admin", password=passwords["admin"])
        eavesdropper_errors = Errors()
        eavesdropper = await nats.connect(
            server.url,
            user="other",
            password=passwords["other"],
            error_cb=eavesdropper_errors.record,
            inbox_prefix=seat_inbox(other),
        )
        heard: list[Msg] = []

        async def overheard(msg: Msg) -> None:
            heard.append(msg)

        try:
            space = Space(admin.jetstream(), SPACE)
            await space.spawn(worker)
            await space.spawn(other)
            for subject in ("_INBOX.>", f"{seat_inbox(worker)}.>", f"{bridge_inbox(SPACE)}.>"):
                await eavesdropper.subscribe(subject, cb=overheard)
            await eavesdropper.flush()
            url = f"nats://127.0.0.1:{server.port}"
            async with (
                bridge_on(config),
                TasksClient.connect(
                    url.replace("//", f"//operator:{passwords['operator']}@"),
                    SPACE,
                    ENDPOINT,
                    seat=operator,
                    timeout=30,
                ) as operator_client,
                TasksClient.connect(
                    url.replace("//", f"//seat:{passwords['seat']}@"),
                    SPACE,
                    ENDPOINT,
                    seat=worker,
                    timeout=30,
                ) as worker_client,
            ):
                task = await operator_client.create_task("Only the worker hears this")
                await worker_client.describe()  # the contract read: a reply to its inbox
                claimed = await worker_client.claim_task(task.taskId)  # the bridge reads
                assert claimed.binding is not None  # the bridge read its lifecycle head
                mine = await worker_client.my_tasks()
                assert [t.taskId for t in mine.tasks] == [task.taskId]
            await eavesdropper.flush()
            await asyncio.sleep(0.2)
            assert heard == []
            denied = [str(e) for e in eavesdropper_errors.seen]
            assert sum("permissions violation" in e for e in denied) == 3, denied
        finally:
            with contextlib.suppress(Exception):
                await eavesdropper.close()
            await admin.close()
