"""``cotal-tasks describe`` and ``invoke``, built on the client, against a real bridge."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, bridge_on, broker, set_up_space
from tests.support.cli import caller_config, cli_output, run
from tests.support.cli import run_cli as cli


async def test_describe_and_invoke(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = caller_config(tmp_path, server.url, SPACE, ENDPOINT)
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
            code, out, _ = await cli(config, "describe")
            assert code == 0
            assert f"{ENDPOINT} (owner " in out
            assert "claim-task       tasks.self   targeted, mode self" in out

            code, out, _ = await cli(
                config, "invoke", "create-task", "--as", str(seat("author", 4)),
                "--args", '{"title":"From the CLI"}',
            )  # fmt: skip
            assert code == 0, out
            created: dict[str, Any] = json.loads(out)
            assert created["ok"] is True
            task_id = created["data"]["taskId"]

            worker = str(seat("worker", 4))
            code, out, _ = await cli(
                config,
                *("invoke", "claim-task", "--mode", "self", "--as", worker),
                *("--args", json.dumps({"taskId": task_id}), "--id", "claim-from-cli"),
            )
            assert code == 0, out
            claimed = json.loads(out)
            assert claimed["id"] == "claim-from-cli"
            assert claimed["data"]["binding"]["actor"] == "worker"

            # A contract error: the endpoint's refusal, printed as its reply envelope.
            other = str(seat("other", 4))
            code, out, _ = await cli(
                config,
                *("invoke", "update-task", "--mode", "self", "--as", other),
                *("--args", json.dumps({"taskId": task_id, "note": "not mine"})),
            )
            assert code == 1
            refused = json.loads(out)
            assert refused["ok"] is False
            assert refused["error"]["code"] == "permission-denied"
            assert refused["error"]["outcome"] == "not-executed"

            # A usage error: refused by the client before sending.
            code, out, _ = await cli(
                config, "invoke", "create-task", "--as", str(seat("author", 4)),
                "--args", '{"title":"x","status":"claimed"}',
            )  # fmt: skip
            assert code == 2
            usage = json.loads(out)
            assert usage["error"]["code"] == "bad-request"
            assert usage["error"]["outcome"] == "not-executed"
            assert "args.status" in usage["error"]["message"]


async def test_a_command_that_acts_as_a_seat_asks_for_one(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = caller_config(tmp_path, server.url, SPACE, ENDPOINT)
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
            author = str(seat("author", 5))
            out = await cli_output(
                config, "invoke", "create-task", "--as", author, "--args", '{"title":"t"}'
            )
            task_id = json.loads(out)["data"]["taskId"]
            claim = (
                "invoke",
                "claim-task",
                "--mode",
                "self",
                "--args",
                f'{{"taskId":"{task_id}"}}',
            )

            env = {k: v for k, v in os.environ.items() if k != "COTAL_TASKS_SEAT"}
            code, out, err = await run(*claim, "--config", str(config), env=env)
            assert code == 2  # before: claimed as local.cli/000…
            assert "--as local.builder/" in err
            assert "COTAL_TASKS_SEAT" in err
            code, out, err = await run(*claim, "--as", "builder", "--config", str(config), env=env)
            assert code == 2
            assert "OWNER.ACTOR/UID" in err
            assert "such as local.builder/" in err

            got = json.loads(
                await cli_output(config, "invoke", "get-task", "--args", out_id(task_id))
            )
            assert got["data"]["status"] == "open"  # nothing was bound by the refusals
            assert "binding" not in got["data"] or got["data"]["binding"] is None

            worker = str(seat("worker", 5))
            code, out, err = await run(
                *claim, "--config", str(config), env={**env, "COTAL_TASKS_SEAT": worker}
            )
            assert code == 0, err
            assert json.loads(out)["data"]["binding"]["actor"] == "worker"


def out_id(task_id: str) -> str:
    return json.dumps({"taskId": task_id})
