"""``cotal-tasks mcp`` driven by the MCP SDK's own client over stdio, against a real bridge
on a real nats-server: the tool list, a claim, an update with evidence, and the refusals
of another seat's task."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from cotal_tasks.bridge.process.broker import free_port
from cotal_tasks.bridge.wire.grants import caller_rows
from cotal_tasks.client import Seat, TasksClient
from cotal_tasks.core import COMMANDS, json_schema
from tests.conformance.conftest import open_mesh
from tests.conformance.permissioned import seat_on_a_permissioned_bridge
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, bridge_on, broker, set_up_space
from tests.support.cli import CLI

AGENT = seat("agent", 5)
SEAT_TOOLS = {"my_tasks", "get_task", "claim_task", "update_task"}


@asynccontextmanager
async def agent_tools(url: str, cwd: Path, as_seat: Seat = AGENT) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=str(CLI),
        args=["mcp", "--as", str(as_seat), "--nats", url, "--space", SPACE, "--endpoint", ENDPOINT],
        cwd=cwd,
    )
    async with Client(params, read_timeout_seconds=60) as session:
        yield session


def structured(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def refusal(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.structured_content
    error: dict[str, Any] = result.structured_content["error"]
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.startswith(f"{error['code']} (outcome {error['outcome']}): ")
    assert error["message"] in text.text  # the remedy travels with the code
    return error


async def test_an_agent_works_its_own_task_and_cannot_touch_another(tmp_path: Path) -> None:
    async with open_mesh(tmp_path) as mesh:
        nc = mesh.nc
        operator = TasksClient(nc, SPACE, ENDPOINT, seat("operator"))
        other = TasksClient(nc, SPACE, ENDPOINT, seat("other", 2))
        open_task = await operator.create_task("Fix the flaky login test")
        held = await operator.create_task("Someone else's task")
        await other.claim_task(held.taskId)
        try:
            async with agent_tools(mesh.url, tmp_path) as agent:
                # before: serverInfo.version was empty
                assert agent.server_info is not None
                assert agent.server_info.version == version("cotal-tasks")
                listed = await agent.list_tools()
                tools = {tool.name: tool for tool in listed.tools}
                # An open mesh carries every command, so the seat has every tool.
                assert set(tools) == SEAT_TOOLS | {"list_tasks", "create_task"}
                claim_schema = json_schema(COMMANDS["claim-task"].input)
                assert tools["claim_task"].input_schema == claim_schema
                assert tools["update_task"].input_schema == json_schema(
                    COMMANDS["update-task"].input
                )

                claimed = structured(
                    await agent.call_tool("claim_task", {"taskId": open_task.taskId})
                )
                assert claimed["status"] == "claimed"
                assert claimed["binding"]["actor"] == "agent"
                assert claimed["binding"]["lifecycleUid"] == AGENT.lifecycleUid
                done = structured(
                    await agent.call_tool(
                        "update_task",
                        {
                            "taskId": open_task.taskId,
                            "status": "done",
                            "note": "Retried the race; fixed.",
                            "evidence": [{"kind": "commit", "ref": "4be1c2d"}],
                        },
                    )
                )
                assert done["status"] == "done"
                assert [(e["kind"], e["ref"]) for e in done["evidence"]] == [("commit", "4be1c2d")]
                mine = structured(await agent.call_tool("my_tasks", {}))
                assert [t["taskId"] for t in mine["tasks"]] == [open_task.taskId]

                taken = refusal(await agent.call_tool("claim_task", {"taskId": held.taskId}))
                assert (taken["code"], taken["outcome"]) == ("conflict", "not-executed")
                foreign = refusal(
                    await agent.call_tool("update_task", {"taskId": held.taskId, "note": "x"})
                )
                assert (foreign["code"], foreign["outcome"]) == (
                    "permission-denied",
                    "not-executed",
                )
                # No argument names a seat: a smuggled target is refused before sending.
                smuggled = refusal(
                    await agent.call_tool(
                        "update_task",
                        {"taskId": held.taskId, "status": "done", "owner": "local"},
                    )
                )
                assert (smuggled["code"], smuggled["outcome"]) == (
                    "bad-request",
                    "not-executed",
                )
            after = await operator.get_task(held.taskId)
            assert after.status == "claimed"
            assert after.binding is not None
            assert after.binding.actor == "other"
            assert (await operator.get_task(open_task.taskId)).evidence[0].ref == "4be1c2d"
        finally:
            await nc.close()


async def test_an_agent_start_leaves_no_refusal_in_the_log_and_reads_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding: every start added ``refused get-task/claim-task/…: bad-request`` lines to
    the bridge's log (its grant probes were calls with empty args). A start now logs
    nothing, and a brief's lines reach the agent as line breaks and come back kept."""
    caplog.set_level(logging.INFO, logger="cotal_tasks.bridge")
    async with open_mesh(tmp_path) as mesh:
        operator = TasksClient(mesh.nc, SPACE, ENDPOINT, seat("operator"))
        brief = "Steps to reproduce:\u20291. open 7\u20282. see it fail"
        task = await operator.create_task("It fails on 7", brief=brief)
        caplog.clear()
        async with agent_tools(mesh.url, tmp_path) as agent:
            listed = await agent.list_tools()
            assert {tool.name for tool in listed.tools} == SEAT_TOOLS | {
                "list_tasks",
                "create_task",
            }
            logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
            assert not [line for line in logged if line.startswith("refused")], logged

            read = await agent.call_tool("get_task", {"taskId": task.taskId})
            assert structured(read)["brief"] == brief  # the record is the contract's
            text = read.content[0]
            assert isinstance(text, types.TextContent)
            assert (
                json.loads(text.text)["brief"] == "Steps to reproduce:\n\n1. open 7\n2. see it fail"
            )

            await agent.call_tool("claim_task", {"taskId": task.taskId})
            written = {"taskId": task.taskId, "brief": "Fixed:\n\n- the parser", "note": "a\nb"}
            updated = structured(await agent.call_tool("update_task", written))
            assert updated["brief"] == "Fixed:\u2029- the parser"  # the note's break was kept too


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        (["tasks.self"], {"my_tasks", "claim_task", "update_task"}),
        (["tasks.self", "tasks.read"], SEAT_TOOLS | {"list_tasks"}),
    ],
)
async def test_tools_follow_the_seat_grants(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capabilities: list[str],
    expected: set[str],
) -> None:
    """The tools are the ones the broker carries for the seat: without tasks.write the
    create-task probe is refused, so create_task is withheld (and so on)."""
    agent_rows = caller_rows(SPACE, ENDPOINT, AGENT, capabilities).as_nats()
    async with (
        seat_on_a_permissioned_bridge(tmp_path, monkeypatch, agent_rows) as as_seat,
        agent_tools(as_seat, tmp_path) as agent,
    ):
        listed = await agent.list_tools()
        assert {tool.name for tool in listed.tools} == expected
        refused = refusal(await agent.call_tool("create_task", {"title": "Not mine"}))
        assert (refused["code"], refused["outcome"]) == ("not-found", "not-executed")
        assert "broker refuses this seat's create-task" in refused["message"]
        mine = structured(await agent.call_tool("my_tasks", {}))
        assert mine["tasks"] == []


async def test_streamable_http_serves_the_same_tools(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
            port = free_port()
            process = await asyncio.create_subprocess_exec(
                str(CLI),
                *("mcp", "--as", str(AGENT), "--nats", server.url),
                *("--space", SPACE, "--endpoint", ENDPOINT, "--http", f"127.0.0.1:{port}"),
                cwd=tmp_path,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                assert process.stderr is not None
                line = await asyncio.wait_for(process.stderr.readline(), 60)
                assert f"serving http://127.0.0.1:{port}/mcp" in line.decode()
                await wait_listening(port)
                async with Client(f"http://127.0.0.1:{port}/mcp") as agent:
                    listed = await agent.list_tools()
                    assert {tool.name for tool in listed.tools} >= SEAT_TOOLS
                    mine = structured(await agent.call_tool("my_tasks", {}))
                    assert mine["tasks"] == []
            finally:
                process.terminate()
                await process.wait()


async def wait_listening(port: int) -> None:
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError(f"nothing listens on {port}")
