"""Assemble the HTTP application from its parts.

``HttpContext`` is everything the routes may use: the endpoints the bridge serves (each
with its command service), the bridge config, metrics, the loaded token secrets, the
event feed, the presence view, the broker connection, and the webhook routes the hosted
providers contribute. The composition root builds it (``bridge.wiring.http``), loading
the token secrets and attaching the event feed to every endpoint's change listener
first; ``create_app`` only reads it, and mounts:

=============================================  =====================================
``/``, ``/static/…``                           the dashboard (static files)
``/v1/openapi.json``                           the OpenAPI description
``/v1/endpoints``                              the endpoints served
``/v1/endpoints/{name}/tasks[/{taskId}]``      list-tasks, get-task
``/v1/endpoints/{name}/my-tasks``              my-tasks
``/v1/endpoints/{name}/board``                 the dashboard feed
``/v1/endpoints/{name}/history``               the append-only history (a task's, or all)
``/v1/events``                                 board-changed as server-sent events
``/healthz``, ``/metrics``                     health and Prometheus metrics
=============================================  =====================================
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cotal_tasks.bridge.http import api, health
from cotal_tasks.bridge.http.context import HttpContext
from cotal_tasks.bridge.http.openapi import openapi_document
from cotal_tasks.bridge.http.responses import error_answer
from cotal_tasks.bridge.http.shed import Shed
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode

__all__ = ["HttpContext", "create_app"]

STATIC = Path(__file__).with_name("static")
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


class _Guard:
    """Security headers on every answer, and the request counter by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers.setdefault(key, value)
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            route = getattr(scope.get("route"), "path", None)
            self.metrics.http_answered(route if isinstance(route, str) else "unmatched", status)


async def _dashboard(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def _openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 405:
        message = f"{request.method} is not served at {request.url.path}; the API is read-only"
        body = {"error": {"code": ErrorCode.BAD_REQUEST.value, "message": message}}
        return JSONResponse(body, status_code=405, headers={"Allow": "GET, HEAD"})
    message = f"nothing is served at {request.url.path}; GET /v1/openapi.json lists the routes"
    return error_answer(ContractError(ErrorCode.NOT_FOUND, message))


def create_app(context: HttpContext) -> Starlette:
    """The bridge's ASGI app over ``context``, which it reads and never changes."""
    contributed = list(context.webhook_routes)
    routes: list[BaseRoute] = [
        Route("/", _dashboard, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/metrics", health.metrics, methods=["GET"]),
        Route("/v1/openapi.json", _openapi, methods=["GET"]),
        Route("/v1/endpoints", api.guarded(api.list_endpoints), methods=["GET"]),
        Route("/v1/endpoints/{name}/tasks", api.guarded(api.list_tasks), methods=["GET"]),
        Route(
            "/v1/endpoints/{name}/tasks/{taskId:path}",
            api.guarded(api.get_task),
            methods=["GET"],
        ),
        Route("/v1/endpoints/{name}/my-tasks", api.guarded(api.my_tasks), methods=["GET"]),
        Route("/v1/endpoints/{name}/board", api.guarded(api.board), methods=["GET"]),
        Route("/v1/endpoints/{name}/history", api.guarded(api.history), methods=["GET"]),
        Route("/v1/events", api.guarded(api.events), methods=["GET"]),
        *contributed,
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: _http_error, 405: _http_error},
    )
    app.state.context = context
    app.state.openapi = openapi_document(contributed)
    app.add_middleware(Shed, limits=context.config.http.limits)  # inside the guard's headers
    app.add_middleware(_Guard, metrics=context.metrics)
    return app
