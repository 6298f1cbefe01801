"""The bridge's HTTP app without a listener or a broker: the composition root's own app
(``build_http_app``) over endpoints opened on their SQLite boards, reached through
``httpx.ASGITransport``. For the checks that are the app's alone (a token's refusal); what
needs the broker (presence, board-changed) or the socket stays on ``open_http_mesh``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig, HttpToken
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.bridge.wiring.http import build_http_app
from tests.bridge.http._support import ACME
from tests.support.bridge import SPACE


@asynccontextmanager
async def in_process_http(
    tmp_path: Path, *, tokens: Sequence[HttpToken] = ()
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the app serving one board endpoint ``ACME``, as a loopback peer."""
    config = BridgeConfig(
        space=SPACE,
        data_dir=tmp_path / "bridge",
        http=HttpConfig(port=0, tokens=tuple(tokens)),
        endpoints=(EndpointConfig(name=ACME),),
    )
    async with open_endpoint(config, config.endpoints[0]) as endpoint:
        app = build_http_app(config, [endpoint], Metrics())
        transport = httpx.ASGITransport(app=app.asgi)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                yield http
        finally:
            app.events.close()
