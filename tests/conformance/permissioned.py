"""A broker whose users hold exactly the ``cotal-tasks grants`` rows: the rows, the
server config, the bridge's config as that user, and the seat and operator connected."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.wire.grants import caller_rows, serve_rows
from cotal_tasks.client.subjects import seat_inbox
from cotal_tasks.core import Seat
from tests.conftest import seat
from tests.support.bridge import (
    ENDPOINT,
    SPACE,
    TEST_HTTP,
    bridge_on,
    broker,
    set_up_space,
)
from tests.support.cli import cli_output
from tests.support.cotal import Space, TestCaller

Json = dict[str, Any]
PREFIX = f"cotal.{SPACE}"


BRIDGE_PASSWORD_ENV = "COTAL_TASKS_TEST_BRIDGE_PASSWORD"


async def grants_rows(config: Path, *args: str) -> Json:
    permissions: Json = json.loads(await cli_output(config, "grants", *args))["permissions"]
    return permissions


def _violations(log: Path, client_name: str) -> list[str]:
    """The broker's logged permission denials for connections named ``client_name``."""
    if not log.exists():
        return []
    return [
        line
        for line in log.read_text(encoding="utf-8").splitlines()
        if "Violation" in line and f':{client_name}"' in line
    ]


@dataclass
class Errors:
    """What nats-py reported through a connection's error_cb."""

    seen: list[Exception] = field(default_factory=list)

    async def record(self, exc: Exception) -> None:
        self.seen.append(exc)


@asynccontextmanager
async def _connected(
    url: str, user: str, password: str, errors: Errors, who: Seat | None = None
) -> AsyncIterator[NATS]:
    """Connected as ``user``; a seat's connection under its own inbox prefix, the one its
    rows let it read (as the typed client connects)."""
    inbox = {"inbox_prefix": seat_inbox(who)} if who is not None else {}
    nc = await nats.connect(
        url, user=user, password=password, error_cb=errors.record, name=user, **inbox
    )
    try:
        yield nc
    finally:
        await nc.close()


async def permission_rows(
    tmp_path: Path, data_dir: Path, seat_seat: Seat, operator_seat: Seat, endpoint_toml: str = ""
) -> tuple[Json, Json, Json]:
    """The ``cotal-tasks grants`` rows for the bridge (``--serve``), a seat holding
    ``tasks.self`` only and an operator, for a config whose one endpoint has the given
    extra TOML lines."""
    toml = tmp_path / "tasks.toml"
    toml.write_text(
        f'space = "{SPACE}"\nnats_url = "nats://127.0.0.1:4222"\ndata_dir = "{data_dir}"\n'
        f'[[endpoints]]\nname = "{ENDPOINT}"\n' + endpoint_toml,
        encoding="utf-8",
    )
    serve, seat_rows, operator_rows = await asyncio.gather(
        grants_rows(toml, "--serve"),
        grants_rows(toml, "--capability", "tasks.self", "--as", str(seat_seat)),
        grants_rows(
            toml,
            *("--capability", "tasks.read", "--capability", "tasks.write"),
            *("--capability", "tasks.bind", "--capability", "tasks.self"),
            *("--as", str(operator_seat)),
        ),
    )
    return serve, seat_rows, operator_rows


def permissioned_users(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    serve: Json,
    seat_rows: Json,
    operator_rows: Json,
    others: dict[str, Json] | None = None,
) -> tuple[dict[str, str], Path]:
    """A nats-server config whose users hold exactly those rows (and ``others``, by user
    name, theirs; and an admin with full rights); the bridge's password is set in the
    environment."""
    extra = others or {}
    names = ("admin", "bridge", "seat", "operator", *extra)
    passwords = {name: secrets.token_hex(12) for name in names}
    users = [
        {"user": "admin", "password": passwords["admin"]},  # full rights: plays Cotal's setup
        {"user": "bridge", "password": passwords["bridge"], "permissions": serve},
        {"user": "seat", "password": passwords["seat"], "permissions": seat_rows},
        {"user": "operator", "password": passwords["operator"], "permissions": operator_rows},
        *({"user": name, "password": passwords[name], "permissions": rows}
          for name, rows in extra.items()),
    ]  # fmt: skip
    server_conf = tmp_path / "nats.conf"
    server_conf.write_text(
        "authorization: " + json.dumps({"users": users}, indent=2) + "\n", encoding="utf-8"
    )
    monkeypatch.setenv(BRIDGE_PASSWORD_ENV, passwords["bridge"])
    return passwords, server_conf


def permissioned_bridge_config(url: str, data_dir: Path, endpoint: EndpointConfig) -> BridgeConfig:
    """The bridge connecting as the ``bridge`` user of ``permissioned_users``."""
    return BridgeConfig(
        space=SPACE,
        http=TEST_HTTP,
        data_dir=data_dir,
        nats_url=url,
        nats_user="bridge",
        nats_password_env=BRIDGE_PASSWORD_ENV,
        endpoints=(endpoint,),
    )


@asynccontextmanager
async def seat_on_a_permissioned_bridge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seat_rows: Json
) -> AsyncIterator[str]:
    """A broker whose ``seat`` user holds ``seat_rows`` (and an operator ``tasks.write``), a
    board bridge serving on it under its ``--serve`` rows; yields the seat user's URL."""
    serve = serve_rows(SPACE, ENDPOINT, "*").as_nats()
    operator = caller_rows(SPACE, ENDPOINT, seat("operator"), ["tasks.write"]).as_nats()
    passwords, conf = permissioned_users(tmp_path, monkeypatch, serve, seat_rows, operator)
    async with broker(tmp_path, config_file=conf) as server:
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = permissioned_bridge_config(
            server.url, tmp_path / "bridge", EndpointConfig(name=ENDPOINT)
        )
        async with bridge_on(config):
            yield f"nats://seat:{passwords['seat']}@127.0.0.1:{server.port}"


@asynccontextmanager
async def permissioned_callers(
    url: str,
    passwords: dict[str, str],
    seat_seat: Seat,
    operator_seat: Seat,
    seat_errors: Errors,
    operator_errors: Errors,
) -> AsyncIterator[tuple[TestCaller, TestCaller, list[str]]]:
    """The seat and the operator connected as their users, the seat spawned, and every
    ``ep.>`` subject the broker delivers, as an admin sees it."""
    admin_errors = Errors()
    async with (
        _connected(url, "admin", passwords["admin"], admin_errors) as admin_nc,
        _connected(url, "seat", passwords["seat"], seat_errors, seat_seat) as seat_nc,
        _connected(url, "operator", passwords["operator"], operator_errors, operator_seat) as op,
    ):
        await Space(admin_nc.jetstream(), SPACE).spawn(seat_seat)
        routed: list[str] = []

        async def route_spy(msg: Msg) -> None:
            routed.append(msg.subject)

        await admin_nc.subscribe(f"{PREFIX}.ep.>", cb=route_spy)
        await admin_nc.flush()
        yield (
            TestCaller(seat_nc, SPACE, ENDPOINT, seat_seat),
            TestCaller(op, SPACE, ENDPOINT, operator_seat),
            routed,
        )
        assert admin_errors.seen == []
