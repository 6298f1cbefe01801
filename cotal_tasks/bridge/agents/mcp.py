"""``cotal-tasks mcp``: the seat's tools as an MCP server (stdio, or streamable HTTP).

The tools and their input and output schemas come from the endpoint's contract as the
seat's client resolved it (``agent_tools``); a refusal is a tool error (``isError``)
whose text carries the contract code, the outcome and the remedy, and whose structured
content is the wire's error object.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from cotal_tasks.bridge.agents.tools import Offered, SeatTools
from cotal_tasks.client import Seat, TasksClient

log = logging.getLogger(__name__)


def _tool(offered: Offered) -> types.Tool:
    contract = offered.contract
    return types.Tool(
        name=offered.spec.name,
        description=offered.spec.description,
        input_schema=dict(contract.input_schema),
        output_schema=dict(contract.output_schema),
    )


def build_server(tools: SeatTools) -> Server[Any]:
    """An MCP server offering exactly ``tools.offered``."""
    client = tools.client

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(o) for o in tools.offered.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        result = await tools.call(params.name, params.arguments)
        content: list[types.ContentBlock] = [types.TextContent(text=result.text)]
        if result.error is not None:
            return types.CallToolResult(
                content=content,
                structured_content={"error": result.error.as_error()},
                is_error=True,
            )
        return types.CallToolResult(content=content, structured_content=result.data)

    withheld = "".join(f" {name}: {why}." for name, why in tools.withheld.items())
    return Server(
        "cotal-tasks",
        version=version("cotal-tasks"),
        instructions=(
            f"You are the seat {client.seat} on the tasks endpoint {client.endpoint} in space "
            f"{client.space}. Every tool acts as this seat: claim a task before working on "
            "it, update it as you go, and record evidence (commits, branches, runs, reviews) "
            "when you finish. A refusal names its code and what to do next."
            + (f" Not available to this seat:{withheld}" if withheld else "")
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


@asynccontextmanager
async def seat_tools(
    nats_url: str, space: str, endpoint: str, seat: Seat, creds: Path | None
) -> AsyncIterator[SeatTools]:
    """Connect as ``seat`` (with its own credentials) and discover its tools."""
    async with TasksClient.connect(
        nats_url, space, endpoint, seat=seat, creds=creds, name=f"mcp-{seat.actor}"
    ) as client:
        yield await SeatTools(client).discover()


async def serve_stdio(tools: SeatTools) -> None:
    server = build_server(tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(tools: SeatTools, host: str, port: int) -> None:
    """Streamable HTTP at ``http://HOST:PORT/mcp``."""
    import uvicorn  # only this transport needs it: a stdio start does not pay for it

    app = build_server(tools).streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
