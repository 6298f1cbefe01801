"""Run an ASGI app under uvicorn inside the bridge's event loop, on a pre-bound socket
(so port 0 picks a free port and the bound address is known before serving), within the
listener's bounds (``bridge.http.listener``)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import uvicorn
from starlette.types import ASGIApp

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.listener import bounded_protocol, connection_cap, uvicorn_options
from cotal_tasks.bridge.http.shed import ShedLog

# Open responses (event streams) get this long to end after the listener is told to stop.
GRACEFUL_S = 5


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling: the bridge's lifecycle owns SIGINT and
    SIGTERM. uvicorn's own handlers record a signal and, once it has shut down, raise it
    again; the bridge took that for a second signal and cancelled its clean stop halfway
    (a subscription's drain cancelled mid-flush, whose late PONG nats-py then logged as an
    ERROR with a traceback)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    on_stop: Callable[[], None] | None = None,
    limits: HttpLimits | None = None,
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` until the block exits; yield the base URL.

    ``on_stop`` runs first when the block exits: it ends long-lived responses (the event
    streams), which the server would otherwise wait on.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on such sockets, and without it
    # every response waits out delayed ACKs (about 40 ms on loopback).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(
            f"cannot listen on {host}:{port} ({exc.strerror}). Choose another [http] port, "
            "or port = 0 for any free one"
        ) from exc
    bounds = limits or HttpLimits()
    cap = connection_cap(bounds)
    options = uvicorn_options(bounds, cap)
    sock.listen(options["backlog"])
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http=bounded_protocol(bounds, ShedLog(), cap),
        lifespan="off",
        log_level="warning",
        access_log=False,  # never log request lines: nothing of a request is echoed
        timeout_graceful_shutdown=GRACEFUL_S,
        **options,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # surface why it stopped
                raise RuntimeError(
                    "the HTTP listener stopped before it started. Check the log above for why, "
                    "then start the bridge again"
                )
            await asyncio.sleep(0.01)
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        yield f"http://{shown}:{bound_port}"
    finally:
        if on_stop is not None:
            on_stop()
        server.should_exit = True
        await task
        sock.close()
