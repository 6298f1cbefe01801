"""The CLI under the grants it prints: on a nats-server whose users hold exactly the rows
``cotal-tasks grants`` prints, an operator's ``invoke`` and ``describe`` (a config naming
the operator's ``nats_user``) succeed as that user, reading replies under the operator
seat's own inbox prefix, never the bridge's. Real subprocesses of the installed command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import EndpointConfig
from tests.conformance.permissioned import (
    permission_rows,
    permissioned_bridge_config,
    permissioned_users,
)
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_on, broker, set_up_space
from tests.support.cli import run

OPS_PASSWORD_ENV = "COTAL_TASKS_TEST_OPS_PASSWORD"


async def test_an_operators_invoke_holds_to_the_operators_own_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, operator = seat("worker", 3), seat("ops", 4)
    serve, seat_rows, operator_rows = await permission_rows(
        tmp_path, tmp_path / "bridge", worker, operator
    )
    passwords, conf = permissioned_users(tmp_path, monkeypatch, serve, seat_rows, operator_rows)
    async with broker(tmp_path, config_file=conf) as server:
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        bridge = permissioned_bridge_config(
            server.url, tmp_path / "bridge", EndpointConfig(name=ENDPOINT)
        )
        ops = tmp_path / "ops.toml"
        ops.write_text(
            f'space = "{SPACE}"\nnats_url = "{server.url}"\nnats_user = "operator"\n'
            f'nats_password_env = "{OPS_PASSWORD_ENV}"\nnats_connect_timeout_s = 5\n'
            f'[[endpoints]]\nname = "{ENDPOINT}"\n',
            encoding="utf-8",
        )
        env = {**os.environ, OPS_PASSWORD_ENV: passwords["operator"]}
        as_ops = ("--config", str(ops), "--as", str(operator))
        async with bridge_on(bridge):
            made = await run(
                "invoke", "create-task", *as_ops, "--json", "--args", '{"title":"Rotate"}', env=env
            )
            listed = await run("invoke", "list-tasks", *as_ops, "--json", env=env)
            described = await run("describe", *as_ops, "--json", env=env)
    code, out, err = made
    # before: the call subscribed _INBOX.bridge.<space>.…, the broker refused it, and the
    # command failed after its timeout ("the contract store … did not answer")
    assert code == 0, (out, err)
    task_id = json.loads(out)["data"]["taskId"]
    code, out, err = listed
    assert code == 0, (out, err)
    assert [t["taskId"] for t in json.loads(out)["data"]["tasks"]] == [task_id]
    code, out, err = described
    assert code == 0, (out, err)
    assert json.loads(out)["endpoint"] == ENDPOINT
