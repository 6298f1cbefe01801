"""The command line's habits, as a person meets them (real subprocesses against a real
bridge on a private nats-server): a mistyped command is named as such, with or without a
seat; a malformed seat reads as one sentence; a command whose one mode is self needs no
``--mode``; a task shows no Python ``None``; on a terminal a refusal is one line on stderr,
the data on stdout; not-found is the same exit status for ``invoke`` as for ``history``."""

from __future__ import annotations

import asyncio
import json
import os
import pty
from pathlib import Path

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from tests.conftest import seat
from tests.support.bridge import (
    ENDPOINT,
    SPACE,
    TEST_HTTP,
    bridge_config,
    bridge_on,
    broker,
    set_up_space,
)
from tests.support.cli import CLI, caller_config, cli_output, run, run_cli


async def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """``cotal-tasks <args>`` with its stdout on a terminal (a pseudo-terminal), as a
    person runs it; its exit code, what the terminal showed, and stderr."""
    leader, follower = pty.openpty()
    try:
        process = await asyncio.create_subprocess_exec(
            str(CLI), *args, stdout=follower, stderr=asyncio.subprocess.PIPE
        )
        os.close(follower)
        _, err = await asyncio.wait_for(process.communicate(), 60)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert process.returncode is not None
    return process.returncode, shown.decode().replace("\r\n", "\n"), err.decode()


async def test_the_command_line_says_what_a_person_needs(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = caller_config(tmp_path, server.url, SPACE, ENDPOINT)
        worker = str(seat("worker", 8))
        env = {k: v for k, v in os.environ.items() if k != "COTAL_TASKS_SEAT"}
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
            # A typo is a typo, whether or not a seat was given (before: without --as,
            # "list-task acts as a seat, and no seat was given").
            for given in ((), ("--as", worker)):
                code, out, err = await run(
                    "invoke", "list-task", *given, "--config", str(config), env=env
                )
                assert code == 2, (out, err)
                assert "no command 'list-task'" in err
                assert "Did you mean list-tasks?" in err
                assert "no seat was given" not in err
                assert out == ""

            # A malformed seat is one sentence and its form (before: "Write it so The
            # form is …").
            code, _, err = await run_cli(
                config, "invoke", "create-task", "--as", "builder", "--args", '{"title":"x"}'
            )
            assert code == 2
            assert "Write it so" not in err
            assert "it has no '/' before the lifecycle uid. Give all three parts. The form" in err
            assert "The form is OWNER.ACTOR/UID" in err

            made = json.loads(
                await cli_output(
                    config, "invoke", "create-task", "--as", worker, "--args", '{"title":"Fix"}'
                )
            )
            task_id = made["data"]["taskId"]
            # claim-task's one mode is self: no --mode needed (before: refused, and the
            # message did not name --mode).
            claimed = json.loads(
                await cli_output(
                    config, "invoke", "claim-task", "--as", worker,
                    "--args", json.dumps({"taskId": task_id}),
                )
            )  # fmt: skip
            assert claimed["data"]["binding"]["actor"] == "worker"
            code, _, err = await run_cli(
                config, "invoke", "bind-task", "--as", worker,
                "--args", json.dumps({"taskId": task_id}),
            )  # fmt: skip
            assert code == 2
            assert "--mode owner or --mode any" in err

            # A person's view of a task: no Python None for a board's absent statusSource.
            shown = await cli_output(
                config, "invoke", "get-task", "--table", "--args", json.dumps({"taskId": task_id})
            )
            assert "None" not in shown, shown
            assert shown.splitlines()[1].split() == ["status", "claimed"]

            # On a terminal: the data on stdout, a refusal as one line on stderr (before:
            # "refused: …" on stdout); not-found is exit 2 as for history (before: 1).
            missing = json.dumps({"taskId": "t-nope"})
            code, shown, err = await on_a_terminal(
                "invoke", "get-task", "--args", missing, "--config", str(config)
            )
            assert code == 2, (shown, err)
            assert shown == ""
            assert err.strip().splitlines() == [
                "cotal-tasks: not-found: no task 't-nope' on this board. Check the id "
                "(list-tasks shows the ids there are)"
            ]
            code, shown, err = await on_a_terminal("invoke", "list-tasks", "--config", str(config))
            assert code == 0, err
            assert shown.splitlines()[0].split() == ["TASK", "STATUS", "BOUND", "TO", "TITLE"]
            assert err == ""
            # Scripts still get the envelope on stdout.
            code, out, _ = await run_cli(config, "invoke", "get-task", "--args", missing)
            assert code == 2
            assert json.loads(out)["error"]["code"] == "not-found"
        code, _, err = await run_cli(config, "history", "t-nope")
        assert code == 2, err


async def test_a_task_not_on_the_first_endpoint_is_shown_where_it_is(tmp_path: Path) -> None:
    """``invoke get-task`` without ``--endpoint`` asks the config's first endpoint; its
    not-found is followed by the endpoint that has the task (before: no hint)."""
    other = "com.acme.other"
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = tmp_path / "two.toml"
        config.write_text(
            f'space = "{SPACE}"\nnats_url = "{server.url}"\ndata_dir = "{tmp_path}/cli"\n'
            f'[[endpoints]]\nname = "{ENDPOINT}"\n[[endpoints]]\nname = "{other}"\n',
            encoding="utf-8",
        )
        bridge = BridgeConfig(
            space=SPACE,
            http=TEST_HTTP,
            data_dir=tmp_path / "bridge",
            nats_url=server.url,
            endpoints=(EndpointConfig(name=ENDPOINT), EndpointConfig(name=other)),
        )
        async with bridge_on(bridge):
            made = json.loads(
                await cli_output(
                    config, "invoke", "create-task", "--endpoint", other,
                    "--as", str(seat("worker", 9)), "--args", '{"title":"Elsewhere"}',
                )
            )  # fmt: skip
            task_id = made["data"]["taskId"]
            asked = json.dumps({"taskId": task_id})
            code, out, err = await run_cli(config, "invoke", "get-task", "--args", asked)
            assert code == 2, (out, err)
            assert json.loads(out)["error"]["code"] == "not-found"
            assert f"endpoint {other} has task '{task_id}'. Give --endpoint {other}" in err
            code, out, err = await run_cli(
                config, "invoke", "get-task", "--args", asked, "--endpoint", other
            )
            assert code == 0, err
