"""The fake GitLab's HTTP side: one Starlette route under ``/api/v4`` that authenticates,
applies scripted faults and the Rack::Attack-style throttle, routes to an endpoint, adds
offset or keyset pagination headers and ``RateLimit-*``, and logs every request in
``fake.requests``.

The endpoints (and their validation) are in ``fake_gitlab_endpoints``, the request
context they answer from in ``fake_gitlab_context``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from tests.support.fake_gitlab_model import LOGGED_HEADERS, http_date
from tests.support.fake_tracker import (
    Endpoint,
    ScriptedFailure,
    logging_app,
    route,
)

if TYPE_CHECKING:
    from tests.support.fake_gitlab_state import FakeGitLab
from tests.support.fake_gitlab_context import API_PREFIX, ApiError, Ctx, Reply, message

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HTML_5XX = (
    "<!DOCTYPE html>\n<html><head><title>GitLab is not responding ({status})</title></head>"
    "<body><h1>{status}</h1><h3>GitLab is not responding.</h3>"
    "<p>Please contact your GitLab administrator if this problem persists.</p></body></html>\n"
)


def create_app(fake: FakeGitLab) -> Starlette:
    """The ASGI app serving ``fake`` (everything outside ``/api/v4`` is a 404)."""
    from tests.support.fake_gitlab_endpoints import ENDPOINTS

    def read(request: Request, raw: bytes) -> tuple[str, Any, Callable[[], Reply]]:
        raw_path = _raw_path(request)
        body, parsed = _parse_body(request, raw)
        return raw_path, parsed, lambda: _answer(fake, ENDPOINTS, request, raw_path, body)

    return logging_app(fake, read, _response, LOGGED_HEADERS)


def _raw_path(request: Request) -> str:
    """The path as sent, ``%2F`` kept (Starlette's ``url.path`` is decoded)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes):
        return raw.split(b"?", 1)[0].decode("latin-1")
    return request.url.path


def _parse_body(request: Request, raw: bytes) -> tuple[dict[str, Any], Any]:
    """The body as parameters (JSON object or form) and as logged. A body that does not
    parse is kept for the log and read as no parameters."""
    if not raw.strip():
        return {}, None
    ctype = request.headers.get("content-type", "")
    if "application/x-www-form-urlencoded" in ctype:
        form: dict[str, Any] = {}
        for key, value in parse_qsl(raw.decode(), keep_blank_values=True):
            if key.endswith("[]"):
                form.setdefault(key[:-2], []).append(value)
            else:
                form[key] = value
        return form, form
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}, raw.decode(errors="replace")
    return (parsed if isinstance(parsed, dict) else {}), parsed


def _answer(
    fake: FakeGitLab,
    endpoints: list[Endpoint[Ctx, Reply]],
    request: Request,
    raw_path: str,
    body: dict[str, Any],
) -> Reply:
    now = fake.clock.seconds
    if now >= fake.rate_reset:  # a new window: the budget refills
        fake.rate_observed = 0
        fake.rate_reset = now + fake.rate_window
    method = request.method
    if not _authorized(fake, request):
        return _plain_error(fake, message(401))
    failure = fake.scripted_failure(method, raw_path, dict(request.query_params))
    if failure is not None:
        return _scripted(fake, failure)
    fake.rate_observed += 1
    if fake.rate_observed > fake.rate_limit:
        return _throttled(fake, fake.retry_after_header)
    try:
        if not raw_path.startswith(API_PREFIX + "/"):
            raise ApiError(404, {"error": "404 Not Found"})
        endpoint, params = route(endpoints, method, raw_path[len(API_PREFIX) :])
        if endpoint is None:
            raise ApiError(404, {"error": "404 Not Found"})
        params = {k: unquote(v) for k, v in params.items()}
        if method in WRITE_METHODS and fake.refusal is not None:
            raise message(*fake.refusal)
        ctx = Ctx(fake, request, params, body, raw_path)
        reply = endpoint.handler(ctx)
        reply.headers |= ctx.headers
    except ApiError as exc:
        reply = Reply(exc.status, exc.body, dict(exc.headers))
    return _with_rate(fake, reply)


def _authorized(fake: FakeGitLab, request: Request) -> bool:
    token = request.headers.get("private-token")
    if token is None:
        scheme, _, value = (request.headers.get("authorization") or "").strip().partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else None
    return token is not None and token.strip() == fake.token


def _scripted(fake: FakeGitLab, failure: ScriptedFailure) -> Reply:
    status = failure.status
    if status == 429:
        reply = _throttled(fake, failure.retry_after is not None, failure.retry_after)
        if failure.message is not None:
            reply.body = failure.message
        return reply
    if status >= 500 and failure.message is None and status in (502, 503, 504):
        html = _HTML_5XX.format(status=status)
        return Reply(status, html, {"content-type": "text/html; charset=utf-8"})
    reply = _plain_error(fake, message(status, failure.message))
    if failure.retry_after is not None and status == 503:
        reply.headers["retry-after"] = str(failure.retry_after)
    return reply


def _throttled(fake: FakeGitLab, retry_after: bool, seconds: int | None = None) -> Reply:
    """Rack::Attack's throttle answer: plain ``Retry later`` with ``RateLimit-*`` (the
    observed count past the limit) and ``Retry-After`` until the window resets."""
    wait = seconds if seconds is not None else max(1, fake.rate_reset - fake.clock.seconds)
    headers = {"content-type": "text/plain"}
    if retry_after:
        headers["retry-after"] = str(wait)
    reply = Reply(429, "Retry later\n", headers)
    if fake.rate_limit_headers:
        reply.headers |= _rate_headers(fake, throttled=True)
    return reply


def _plain_error(fake: FakeGitLab, exc: ApiError) -> Reply:
    return _with_rate(fake, Reply(exc.status, exc.body, dict(exc.headers)))


def _rate_headers(fake: FakeGitLab, *, throttled: bool = False) -> dict[str, str]:
    headers = {
        "ratelimit-limit": str(fake.rate_limit),
        "ratelimit-observed": str(fake.rate_observed),
        "ratelimit-remaining": str(fake.rate_remaining),
        "ratelimit-reset": str(fake.rate_reset),
        "ratelimit-resettime": http_date(fake.rate_reset),
    }
    if throttled:
        headers = {"ratelimit-name": "throttle_authenticated_api"} | headers
    return headers


def _with_rate(fake: FakeGitLab, reply: Reply) -> Reply:
    if fake.rate_limit_headers:
        reply.headers |= _rate_headers(fake)
    return reply


def _response(reply: Reply) -> Response:
    correlation = uuid.uuid4().hex[:26].upper()
    common = {
        "cache-control": "max-age=0, private, must-revalidate",
        "vary": "Origin",
        "x-request-id": correlation,
        "x-gitlab-meta": json.dumps({"correlation_id": correlation, "version": "1"}),
        "x-runtime": "0.042",
    }
    headers = common | reply.headers
    if reply.body is None or reply.status in (204, 304):
        return Response(status_code=reply.status, headers=headers)
    if isinstance(reply.body, str):
        headers.setdefault("content-type", "text/plain")
        return Response(reply.body, status_code=reply.status, headers=headers)
    payload = json.dumps(reply.body, separators=(",", ":"), ensure_ascii=False).encode()
    headers["content-type"] = "application/json"
    return Response(payload, status_code=reply.status, headers=headers)
