"""The read API under ``/v1``: the wire's read commands over HTTP, plus the dashboard feed.

Every read goes through the endpoint's ``CommandService.handle``, the same service the
wire serves, so the page shape, the ceiling (``appliedLimit``), cursors, the ``stale``
marker and the error codes are the wire's. Query parameters are the command's arguments
(``status`` may repeat or be comma-separated); an unknown one is a 400, as an unknown
argument is a ``bad-request`` on the wire.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.bridge.http.auth import READ, SELF, Grant, require
from cotal_tasks.bridge.http.context import HttpContext, ServedEndpoint, context_of, tokens_of
from cotal_tasks.bridge.http.events import PlacedStream, event_stream
from cotal_tasks.bridge.http.history import history_page
from cotal_tasks.bridge.http.responses import error_answer, json_answer
from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.core import ContractError, ErrorCode, Mode, Seat

Json = dict[str, Any]
Handler = Callable[[Request, HttpContext], Awaitable[Response]]
_MAX_LIMIT_DIGITS = 18


def guarded(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Run ``handler``; answer any ``ContractError`` in the one error shape."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request, context_of(request))
        except ContractError as exc:
            return error_answer(exc)

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def authorize(request: Request, capability: str) -> Grant:
    grant = tokens_of(request).authenticate(request)
    require(grant, capability)
    return grant


async def serve(
    ctx: HttpContext,
    name: str,
    command: str,
    caller: Seat,
    args: Json,
    mode: Mode | None = None,
) -> Json:
    """One command through the endpoint's service, counted as served over HTTP."""
    endpoint = ctx.endpoint(name)
    call = Call(command, caller, "http-" + secrets.token_urlsafe(12), args, mode)
    return await counted(ctx, name, command, endpoint.service.handle(call))


async def counted(ctx: HttpContext, name: str, command: str, answer: Awaitable[Json]) -> Json:
    """Await ``answer`` (a read or write of ``command``), counted as served over HTTP."""
    started = time.perf_counter()
    code = "ok"
    try:
        result = await answer
    except ContractError as exc:
        code = exc.code.value
        raise
    finally:
        ctx.metrics.command_served(name, command, code, time.perf_counter() - started, "http")
    if "changeSeq" in result:
        ctx.metrics.changed(name, result["changeSeq"])
    return result


def query_args(request: Request, command: str, allowed: tuple[str, ...]) -> Json:
    """The command's arguments from the query string, or a 400 naming the problem."""
    params = request.query_params
    unknown = sorted(set(params.keys()) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) if allowed else "no query parameters"
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"{command} takes {takes}. Remove {', '.join(unknown)}"
        )
    args: Json = {}
    for key in ("cursor", "limit"):
        values = params.getlist(key)
        if key not in allowed or not values:
            continue
        if len(values) > 1:
            raise ContractError(
                ErrorCode.BAD_REQUEST, f"{key} is given {len(values)} times. Give it once"
            )
        args[key] = values[0]
    if "limit" in args:
        text = args["limit"]
        if not (text.isascii() and text.isdigit()) or len(text) > _MAX_LIMIT_DIGITS:
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                "limit must be a whole number of at least 1. Omit it for the ceiling",
            )
        args["limit"] = int(text)
    if "status" in allowed and (values := params.getlist("status")):
        args["status"] = [part for value in values for part in value.split(",")]
    return args


async def list_endpoints(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints: the endpoints this bridge serves."""
    authorize(request, READ)
    query_args(request, "GET /v1/endpoints", ())
    described = [
        describe_endpoint(name, endpoint.config, await discovered_sources(endpoint))
        for name, endpoint in ctx.endpoints.items()
    ]
    return json_answer({"space": ctx.config.space, "endpoints": described})


async def discovered_sources(endpoint: ServedEndpoint) -> tuple[str, ...] | None:
    """The sources an endpoint whose tracker lists them has now (its sync state's, the
    discovery's own entry left out); ``None`` for one whose config lists them."""
    discovery = getattr(endpoint.config.settings, "discovery", None)
    if not isinstance(discovery, str):
        return None
    try:
        state = await endpoint.service.store.sync_state()
    except ContractError:
        return None
    return tuple(s.source for s in state.sources if s.source != discovery) if state else None


def describe_endpoint(
    name: str, config: EndpointConfig, discovered: tuple[str, ...] | None = None
) -> Json:
    out: Json = {"name": name, "provider": config.provider, "pageCeiling": config.page_ceiling}
    # A tracker's settings may say where a task's own page is (``{number}``: the number
    # after ``#`` in the task id); the dashboard links each card there.
    link = getattr(config.settings, "task_link", None)
    if isinstance(link, str):
        out["taskLink"] = link
    # How many tracker accounts its seat directory maps (never which): the detail says why
    # an issue assigned to one of them can still show no seat.
    seats = getattr(config.settings, "seats", None)
    if isinstance(seats, dict) and seats:
        out["seatAccounts"] = len(seats)
    # An endpoint over several sources (repositories, projects) names them: the dashboard
    # filters its cards by the one a task id names. Discovered ones: those it has now.
    sources = discovered if discovered is not None else getattr(config.settings, "sources", None)
    if isinstance(sources, tuple) and len(sources) > 1:
        out["sources"] = list(sources)
    return out


async def list_tasks(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints/{name}/tasks: list-tasks."""
    grant = authorize(request, READ)
    args = query_args(request, "list-tasks", ("cursor", "limit", "status"))
    name = request.path_params["name"]
    return json_answer(await serve(ctx, name, "list-tasks", grant.reader(), args))


async def get_task(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints/{name}/tasks/{taskId}: get-task."""
    grant = authorize(request, READ)
    query_args(request, "get-task", ())
    args = {"taskId": request.path_params["taskId"]}
    name = request.path_params["name"]
    return json_answer(await serve(ctx, name, "get-task", grant.reader(), args))


async def my_tasks(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints/{name}/my-tasks: my-tasks for the token's principal and uid."""
    grant = authorize(request, SELF)
    seat = grant.seat()
    args = query_args(request, "my-tasks", ("cursor", "limit"))
    name = request.path_params["name"]
    return json_answer(await serve(ctx, name, "my-tasks", seat, args, mode="self"))


async def board(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints/{name}/board: a list-tasks page of full records, with liveness
    (the dashboard asks once per status column)."""
    authorize(request, READ)
    args = query_args(request, "list-tasks", ("cursor", "limit", "status"))
    name = request.path_params["name"]
    service = ctx.endpoint(name).service
    # One page read of full records: counted as the list-tasks it answers, and no get-task.
    page = await counted(ctx, name, "list-tasks", service.record_page(args))
    seats = {
        str(seat): seat
        for task in page["tasks"]
        if (seat := _bound_seat(task.get("binding"))) is not None
    }
    snapshot = await ctx.presence.snapshot({seat.principal for seat in seats.values()})
    page["endpoint"] = name
    page["presence"] = snapshot.to_json()
    page["liveness"] = {key: snapshot.liveness(seat) for key, seat in seats.items()}
    return json_answer(page)


async def history(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/endpoints/{name}/history: the append-only history, of one task (``taskId``)
    or of the whole endpoint, oldest first."""
    authorize(request, READ)
    args = query_args(request, "GET history", ("cursor", "limit", "taskId"))
    task_ids = request.query_params.getlist("taskId")
    if len(task_ids) > 1:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"taskId is given {len(task_ids)} times. Give it once"
        )
    if task_ids:
        args["taskId"] = task_ids[0]
    name = request.path_params["name"]
    service = ctx.endpoint(name).service
    page = await counted(ctx, name, "history", history_page(service, args))
    page["endpoint"] = name
    return json_answer(page)


def _bound_seat(binding: Json | None) -> Seat | None:
    if binding is None:
        return None
    try:
        return Seat(binding["owner"], binding["actor"], binding["lifecycleUid"])
    except ContractError:
        return None  # a binding from a provider whose seats are not Cotal tokens: no liveness


async def events(request: Request, ctx: HttpContext) -> Response:
    """GET /v1/events: board-changed of every endpoint, as server-sent events."""
    grant = authorize(request, READ)
    query_args(request, "GET /v1/events", ())
    limits = ctx.config.http.limits
    caller = f"{grant.principal}/{grant.lifecycle_uid or ''}"
    try:
        ctx.events.take_place(
            caller, most=limits.max_streams, most_per_caller=limits.max_streams_per_token
        )
    except ContractError as exc:
        refused = error_answer(exc)
        refused.headers["Retry-After"] = str(limits.retry_after_s)
        return refused
    return PlacedStream(
        event_stream(ctx.events, ctx.keepalive_s, ctx.metrics),
        release=lambda: ctx.events.give_back(caller),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
