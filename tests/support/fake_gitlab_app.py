"""The fake GitLab's HTTP side: one Starlette route under ``/api/v4`` that authenticates,
applies scripted faults and the Rack::Attack-style throttle, routes to an endpoint, adds
offset or keyset pagination headers and ``RateLimit-*``, and logs every request in
``fake.requests``.

The endpoints (and their validation) are in ``fake_gitlab_endpoints``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.fake_gitlab_model import (
    JSON,
    LOGGED_HEADERS,
    Issue,
    MergeRequest,
    Project,
    http_date,
)
from tests.support.fake_gitlab_render import Shapes
from tests.support.fake_tracker import ScriptedFailure, held_answered_logged

if TYPE_CHECKING:
    from tests.support.fake_gitlab_state import FakeGitLab

T = TypeVar("T")
API_PREFIX = "/api/v4"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
REASONS = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_HTML_5XX = (
    "<!DOCTYPE html>\n<html><head><title>GitLab is not responding ({status})</title></head>"
    "<body><h1>{status}</h1><h3>GitLab is not responding.</h3>"
    "<p>Please contact your GitLab administrator if this problem persists.</p></body></html>\n"
)


class ApiError(Exception):
    """An error answer. GitLab has two body shapes: ``{"message": …}`` from its own
    helpers (401/403/404, model validation) and ``{"error": …}`` from Grape parameter
    validation and ``error!`` (bad params, the offset cap)."""

    def __init__(self, status: int, body: Any, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body
        self.headers = headers or {}


def message(status: int, text: str | None = None) -> ApiError:
    """``{"message": "403 Forbidden"}`` and the like."""
    return ApiError(status, {"message": text or f"{status} {REASONS.get(status, 'Error')}"})


def not_found(what: str | None = None) -> ApiError:
    """``404 Project Not Found``, ``404 Issue Not Found`` … or a bare ``404 Not found``."""
    return message(404, f"404 {what} Not Found" if what else "404 Not found")


def param_error(text: str) -> ApiError:
    """Grape's parameter validation: 400 ``{"error": "state does not have a valid value"}``."""
    return ApiError(400, {"error": text})


def invalid_record(field_name: str, problem: str) -> ApiError:
    """A model validation failure: 400 ``{"message": {"title": ["can't be blank"]}}``."""
    return ApiError(400, {"message": {field_name: [problem]}})


@dataclass
class Reply:
    status: int
    body: Any = None  # JSON-serializable, a str (sent as is), or None for an empty body
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Keyset:
    """How a list supports ``pagination=keyset``: the ``order_by`` values it accepts
    and, for each, the sort key (ties broken by ``id`` in the same direction)."""

    resource: str  # the type named in the offset-cap message, e.g. "Issue"
    orders: dict[str, Callable[[Any], Any]]
    default_order: str = "created_at"


@dataclass
class Ctx:
    """What an endpoint gets: the fake, the request, path parameters (decoded), the
    merged query/body parameters, and the raw path (for ``Link`` URLs)."""

    fake: FakeGitLab
    request: Request
    params: dict[str, str]
    body: dict[str, Any]
    raw_path: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def api(self) -> str:
        return str(self.request.base_url).rstrip("/") + API_PREFIX

    @property
    def shapes(self) -> Shapes:
        return self.fake.shapes(self.api)

    def query(self, name: str, default: str | None = None) -> str | None:
        return self.request.query_params.get(name, default)

    def arg(self, name: str) -> Any:
        """A parameter from the body, else the query string (GitLab takes both)."""
        if name in self.body:
            return self.body[name]
        return self.request.query_params.get(name)

    def project(self) -> Project:
        """The project at ``:id`` (a numeric id or a URL-encoded path)."""
        ref = self.params["id"]
        project = self.fake.find_project(ref)
        if project is None:
            raise not_found("Project")
        return project

    def issue(self) -> Issue:
        issue = self.project().issues.get(int(self.params["iid"]))
        if issue is None:
            raise not_found("Issue")
        return issue

    def merge_request(self) -> MergeRequest:
        mr = self.project().merge_requests.get(int(self.params["iid"]))
        if mr is None:
            raise not_found("Merge Request")
        return mr

    # -- pagination ----------------------------------------------------------------

    def paginate(self, items: Sequence[T], keyset: Keyset | None = None) -> list[T]:
        """This request's page of ``items`` (already filtered and ordered for offset
        pagination). With ``keyset`` the list supports ``pagination=keyset`` (unless the
        fake says it does not, as before GitLab 18.3) and the offset cap."""
        per_page = _int_param(self, "per_page", 20)
        per_page = 20 if per_page < 1 else min(per_page, 100)
        if (
            keyset is not None
            and self.fake.keyset_supported
            and self.query("pagination") == "keyset"
            and (self.query("order_by") or keyset.default_order) in keyset.orders
        ):
            return self._keyset_page(items, keyset, per_page)
        return self._offset_page(items, per_page, keyset)

    def _offset_page(self, items: Sequence[T], per_page: int, keyset: Keyset | None) -> list[T]:
        page = max(_int_param(self, "page", 1), 1)
        cap = self.fake.max_offset
        if keyset is not None and cap is not None and cap > 0 and page * per_page > cap:
            raise ApiError(
                405,
                {
                    "error": f"Offset pagination has a maximum allowed offset of {cap} for "
                    f"requests that return objects of type {keyset.resource}. Remaining "
                    "records can be retrieved using keyset pagination."
                },
            )
        total = len(items)
        counted = total <= self.fake.count_limit
        total_pages = max(1, -(-total // per_page))
        out_of_range = counted and page > total_pages
        next_page = page + 1 if page * per_page < total else None
        prev_page = page - 1 if page > 1 and not out_of_range else None
        headers = {
            "x-page": str(page),
            "x-per-page": str(per_page),
            "x-next-page": str(next_page or ""),
            "x-prev-page": str(prev_page or ""),
        }
        links: list[tuple[int, str]] = []
        if prev_page:
            links.append((prev_page, "prev"))
        if next_page:
            links.append((next_page, "next"))
        links.append((1, "first"))
        if counted:
            headers |= {"x-total": str(total), "x-total-pages": str(total_pages)}
            links.append((total_pages, "last"))
        headers["link"] = ", ".join(
            f'<{self._url(page=str(p), per_page=str(per_page))}>; rel="{rel}"' for p, rel in links
        )
        self.headers |= headers
        return list(items[(page - 1) * per_page : page * per_page])

    def _keyset_page(self, items: Sequence[T], keyset: Keyset, per_page: int) -> list[T]:
        order = self.query("order_by") or keyset.default_order
        descending = (self.query("sort") or "desc") == "desc"
        key = keyset.orders[order]

        def sort_key(item: Any) -> tuple[Any, int]:
            return (key(item), int(item.id))

        ordered = sorted(items, key=sort_key, reverse=descending)
        cursor = self.query("cursor")
        if cursor:
            after = _decode_cursor(cursor, order)
            if descending:
                ordered = [i for i in ordered if sort_key(i) < after]
            else:
                ordered = [i for i in ordered if sort_key(i) > after]
        page = ordered[:per_page]
        if len(ordered) > per_page:
            last: Any = page[-1]
            next_cursor = _encode_cursor(order, key(last), int(last.id))
            self.headers["link"] = f'<{self._url(cursor=next_cursor)}>; rel="next"'
        return page

    def _url(self, **changes: str) -> str:
        """This request's absolute URL (raw path kept) with query ``changes``."""
        query = dict(parse_qsl(self.request.url.query, keep_blank_values=True)) | changes
        base = str(self.request.base_url).rstrip("/")
        return f"{base}{self.raw_path}?{urlencode(query)}"


def _int_param(ctx: Ctx, name: str, default: int) -> int:
    value = ctx.query(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise param_error(f"{name} is invalid") from None


def _encode_cursor(order: str, value: Any, item_id: int) -> str:
    """Opaque like GitLab's: url-safe base64 of ``{"updated_at": …, "id": "…",
    "_kd": "n"}`` (a timestamp travels as epoch ms here)."""
    payload: JSON = {"id": str(item_id), "_kd": "n"}
    if order != "id":
        payload = {order: value} | payload
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def _decode_cursor(cursor: str, order: str) -> tuple[Any, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        item_id = int(data["id"])
        value = item_id if order == "id" else data[order]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise message(400, "400 Bad request - Invalid cursor value") from None
    return (value, item_id)


@dataclass(frozen=True)
class Endpoint:
    method: str
    pattern: re.Pattern[str]
    handler: Callable[[Ctx], Reply]


def create_app(fake: FakeGitLab) -> Starlette:
    """The ASGI app serving ``fake`` (everything outside ``/api/v4`` is a 404)."""
    from tests.support.fake_gitlab_endpoints import ENDPOINTS

    async def dispatch(request: Request) -> Response:
        raw = await request.body()
        raw_path = _raw_path(request)
        body, parsed = _parse_body(request, raw)
        reply = await held_answered_logged(
            fake,
            request,
            raw_path,
            parsed,
            lambda: _answer(fake, ENDPOINTS, request, raw_path, body),
            LOGGED_HEADERS,
        )
        return _response(reply)

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(routes=[Route("/{path:path}", dispatch, methods=methods)])


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
    endpoints: list[Endpoint],
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
    if fake.before_answer is not None:
        fake.before_answer(method, raw_path, dict(request.query_params))
    failure = next((f for f in fake.failures if f.applies(method, raw_path)), None)
    if failure is not None:
        fake.failures.remove(failure)
        return _scripted(fake, failure)
    fake.rate_observed += 1
    if fake.rate_observed > fake.rate_limit:
        return _throttled(fake, fake.retry_after_header)
    try:
        if not raw_path.startswith(API_PREFIX + "/"):
            raise ApiError(404, {"error": "404 Not Found"})
        endpoint, params = _route(endpoints, method, raw_path[len(API_PREFIX) :])
        if endpoint is None:
            raise ApiError(404, {"error": "404 Not Found"})
        if method in WRITE_METHODS and fake.refusal is not None:
            raise message(*fake.refusal)
        ctx = Ctx(fake, request, params, body, raw_path)
        reply = endpoint.handler(ctx)
        reply.headers |= ctx.headers
    except ApiError as exc:
        reply = Reply(exc.status, exc.body, dict(exc.headers))
    return _with_rate(fake, reply)


def _route(endpoints: list[Endpoint], method: str, path: str) -> tuple[Endpoint | None, Any]:
    path = path.rstrip("/") or "/"
    if method == "HEAD":
        method = "GET"
    for endpoint in endpoints:
        if endpoint.method == method:
            match = endpoint.pattern.fullmatch(path)
            if match:
                return endpoint, {k: unquote(v) for k, v in match.groupdict().items()}
    return None, {}


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
