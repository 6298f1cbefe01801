"""``cotal-tasks serve`` logs as asked (a real subprocess on its embedded nats-server):
``[log] format = "json"`` writes one JSON object a line, naming the endpoint, the command
and the envelope id of a request; libraries stay at warning even at the debug level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.support.cli import cli_output, run_cli, serving
from tests.support.tcp_proxy import TcpProxy

ENDPOINT = "com.acme.tasks"
SEAT = "local.builder/01j9builder000000000000000"


async def test_json_lines_name_the_endpoint_the_command_and_the_envelope(tmp_path: Path) -> None:
    config = tmp_path / "tasks.toml"
    config.write_text(
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n[http]\nenabled = false\n'
        '[log]\nlevel = "debug"\nformat = "json"\n'
        f'[[endpoints]]\nname = "{ENDPOINT}"\n',
        encoding="utf-8",
    )
    async with serving(config) as bridge:
        await cli_output(
            config,
            *("invoke", "create-task", "--as", SEAT, "--id", "e-log-1"),
            *("--args", '{"title":"Logged"}'),
        )
    entries = json_lines(bridge.stderr)
    assert entries  # before: [log] was refused as an unknown key
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in entries)
    served = [e for e in entries if e.get("envelope_id") == "e-log-1"]
    assert served, entries
    assert served[0]["endpoint"] == ENDPOINT
    assert served[0]["command"] == "create-task"
    assert not [e for e in entries if e["logger"].split(".")[0] in ("alembic", "httpx")]


async def test_a_refused_request_is_one_json_line_and_an_answered_one_is_quiet(
    tmp_path: Path,
) -> None:
    config = tmp_path / "tasks.toml"
    config.write_text(  # the default level: info
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n[http]\nenabled = false\n'
        f'[log]\nformat = "json"\n[[endpoints]]\nname = "{ENDPOINT}"\n',
        encoding="utf-8",
    )
    async with serving(config) as bridge:
        await cli_output(
            config,
            *("invoke", "create-task", "--as", SEAT, "--id", "e-log-ok"),
            *("--args", '{"title":"Answered"}'),
        )
        code, _, _ = await run_cli(
            config,
            *("invoke", "get-task", "--id", "e-log-refused", "--args", '{"taskId":"t-nope"}'),
        )
        assert code != 0
    entries = json_lines(bridge.stderr)
    line = logged_once(entries, "e-log-refused")  # before: only at debug
    assert line["level"] == "info"
    assert line["endpoint"] == ENDPOINT
    assert line["command"] == "get-task"
    assert "not-found" in line["message"]
    assert not [e for e in entries if e.get("envelope_id") == "e-log-ok"]  # answered: quiet


@pytest.mark.postgres
async def test_a_failed_request_is_one_json_line_at_warning(
    tmp_path: Path, postgres_database: str
) -> None:
    url = make_url(postgres_database)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    port = await proxy.start()
    database = url.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    config = tmp_path / "tasks.toml"
    config.write_text(  # the default level: info
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\ndatabase_connect_timeout_s = 1\n'
        f'[http]\nenabled = false\n[log]\nformat = "json"\n'
        f'[[endpoints]]\nname = "{ENDPOINT}"\ndatabase = "{database}"\n',
        encoding="utf-8",
    )
    async with serving(config) as bridge:
        await proxy.stop()  # the database goes away under the serving bridge
        code, _, _ = await run_cli(
            config,
            *("invoke", "get-task", "--id", "e-log-failed", "--args", '{"taskId":"t-1"}'),
        )
        assert code != 0
    line = logged_once(json_lines(bridge.stderr), "e-log-failed")  # before: only at debug
    assert line["level"] == "warning"
    assert line["endpoint"] == ENDPOINT
    assert line["command"] == "get-task"
    assert "unavailable" in line["message"]


def json_lines(err: bytes) -> list[dict[str, Any]]:
    """The bridge's log: one JSON object a line."""
    return [json.loads(line) for line in err.decode().splitlines() if line.strip()]


def logged_once(entries: list[dict[str, Any]], envelope_id: str) -> dict[str, Any]:
    """The one log line of the request ``envelope_id``."""
    found = [e for e in entries if e.get("envelope_id") == envelope_id]
    assert len(found) == 1, entries
    return found[0]
