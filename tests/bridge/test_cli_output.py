"""Output for scripts and for people (real subprocesses against a real bridge on a private
nats-server): ``--json`` on every command that prints data, a table for ``list-tasks``
and ``my-tasks``, a readable ``get-task``, and ``history`` of an unknown task refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, bridge_on, broker, set_up_space
from tests.support.cli import cli_output, run, run_cli


async def test_json_for_scripts_and_tables_for_people(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = tmp_path / "tasks.toml"
        config.write_text(
            f'space = "{SPACE}"\nnats_url = "{server.url}"\ndata_dir = "{tmp_path}/bridge"\n'
            f'[http]\nenabled = false\n[[endpoints]]\nname = "{ENDPOINT}"\n',
            encoding="utf-8",
        )
        worker = str(seat("worker", 7))
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
            made = json.loads(
                await cli_output(
                    config,
                    "invoke",
                    "create-task",
                    "--json",
                    "--as",
                    worker,
                    "--args",
                    '{"title":"Rotate the certificates","brief":"Before Friday."}',
                )
            )
            task_id = made["data"]["taskId"]
            await cli_output(
                config, "invoke", "claim-task", "--mode", "self", "--as", worker,
                "--args", json.dumps({"taskId": task_id}),
            )  # fmt: skip

            listed = await cli_output(config, "invoke", "list-tasks", "--table")
            header, row, *_ = listed.splitlines()
            assert header.split() == ["TASK", "STATUS", "BOUND", "TO", "TITLE"]
            assert row.split()[:3] == [task_id, "claimed", worker]
            assert "Rotate the certificates" in row
            mine = await cli_output(
                config, "invoke", "my-tasks", "--mode", "self", "--as", worker, "--table"
            )
            assert task_id in mine.splitlines()[1]
            got = await cli_output(
                config, "invoke", "get-task", "--table", "--args", json.dumps({"taskId": task_id})
            )
            assert got.splitlines()[0] == f"{task_id}: Rotate the certificates"
            assert f"bound to    {worker}" in got
            assert "brief       Before Friday." in got

            described = json.loads(await cli_output(config, "describe", "--json"))
            assert described["endpoint"] == ENDPOINT
            assert described["commands"]["claim-task"]["capability"] == "tasks.self"
            checked = json.loads(await cli_output(config, "check-config", "--json"))
            assert checked["endpoints"][0]["name"] == ENDPOINT
        # the board is free once the bridge stopped: history reads it directly
        history = json.loads(await cli_output(config, "history", task_id, "--json"))
        assert [e["command"] for e in history["history"]] == ["create-task", "claim-task"]
        code, _, err = await run_cli(config, "history", "t-nope")
        assert code == 2  # before: "no history" and exit 0
        assert "no task 't-nope'" in err


async def test_shell_completion_is_printed_and_completes_the_lazy_commands() -> None:
    code, script, _ = await run("completion", "bash")
    assert code == 0  # before: no completion command
    assert "_COTAL_TASKS_COMPLETE=bash_complete" in script
    env = {
        **os.environ,
        "_COTAL_TASKS_COMPLETE": "bash_complete",
        "COMP_WORDS": "cotal-tasks check",
        "COMP_CWORD": "1",
    }
    code, out, _ = await run(env=env)
    assert code == 0
    assert "plain,check-config" in out.splitlines()
