"""The fake GitHub's HTTP side: one Starlette route that authenticates, applies scripted
faults and the primary rate limit, routes to an endpoint, adds ETag/304 and ``Link``
pagination, and logs every request in ``fake.requests``.

The endpoints (and their validation) are in ``fake_github_endpoints``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from tests.support.fake_github_model import DOCS, JSON, LOGGED_HEADERS, Issue, Repo, user_id
from tests.support.fake_github_render import Shapes
from tests.support.fake_tracker import (
    Endpoint,
    ScriptedFailure,
    logging_app,
    route,
)

if TYPE_CHECKING:
    from tests.support.fake_github_state import FakeGitHub

T = TypeVar("T")
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
RATE_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID {rid}."
)
_HTML_5XX = (
    "<!DOCTYPE html>\n<html><head><title>Unicorn! &middot; GitHub</title></head>"
    "<body><p>No server is currently available to service your request.</p></body></html>\n"
)


class ApiError(Exception):
    """An error answer in GitHub's shape: ``message``, optional ``errors``, docs URL."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        errors: list[JSON] | None = None,
        headers: dict[str, str] | None = None,
        extra: JSON | None = None,
        docs: str = DOCS,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: JSON = {"message": message}
        if errors is not None:
            self.body["errors"] = errors
        self.body |= extra or {}
        self.body |= {"documentation_url": docs, "status": str(status)}
        self.headers = headers or {}


def validation_failed(*errors: JSON, resource: str = "Issue") -> ApiError:
    return ApiError(422, "Validation Failed", errors=[{"resource": resource, **e} for e in errors])


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


@dataclass
class Reply:
    status: int
    body: Any = None  # JSON-serializable, or None for an empty body
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Ctx:
    """What an endpoint gets: the fake, the request, path parameters and the JSON body."""

    fake: FakeGitHub
    request: Request
    params: dict[str, str]
    body: Any
    link: str | None = None

    @property
    def api(self) -> str:
        return str(self.request.base_url).rstrip("/")

    @property
    def shapes(self) -> Shapes:
        return Shapes(self.fake.repos, self.api, self.fake.html_url)

    def query(self, name: str, default: str | None = None) -> str | None:
        return self.request.query_params.get(name, default)

    def repo(self) -> Repo:
        """The repository at the path: 404 unknown, or outside the App installation the
        token belongs to (``fake.installation``)."""
        name = f"{self.params['owner']}/{self.params['repo']}"
        repo = self.fake.repos.get(name)
        granted = self.fake.installation
        if repo is None or (granted is not None and name not in granted):
            raise not_found()
        return repo

    def issue(self) -> Issue:
        """The issue at the path: 404 unknown, 410 deleted, 301 transferred."""
        issue = self.repo().issues.get(int(self.params["number"]))
        if issue is None:
            raise not_found()
        if issue.deleted:
            raise ApiError(410, "This issue was deleted")
        if issue.moved_to is not None:
            moved = f"{self.api}/repos/{issue.moved_to[0]}/issues/{issue.moved_to[1]}"
            raise ApiError(
                301,
                "Moved Permanently",
                extra={"url": moved},
                headers={"location": moved},
                docs="https://docs.github.com/v3/#http-redirects",
            )
        return issue

    def page(self, items: list[T]) -> list[T]:
        """This request's page of ``items`` (``per_page`` default 30, max 100); sets the
        ``Link`` header (prev/next/last/first, as absolute request URLs)."""
        per_page = _int(self.query("per_page"), 30)
        per_page = 30 if per_page < 1 else min(per_page, 100)
        page = max(_int(self.query("page"), 1), 1)
        last = max(1, -(-len(items) // per_page))
        links: list[tuple[int, str]] = []
        if page > 1:
            links.append((min(page - 1, last), "prev"))
        if page < last:
            links += [(page + 1, "next"), (last, "last")]
        if page > 1:
            links.append((1, "first"))
        if links:
            url = self.request.url
            self.link = ", ".join(
                f'<{url.include_query_params(page=p)}>; rel="{rel}"' for p, rel in links
            )
        return items[(page - 1) * per_page : page * per_page]


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def create_app(fake: FakeGitHub) -> Starlette:
    """The ASGI app serving ``fake``."""
    from tests.support.fake_github_endpoints import ENDPOINTS

    def read(request: Request, raw: bytes) -> tuple[str, Any, Callable[[], Reply]]:
        try:
            parsed = json.loads(raw) if raw.strip() else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return request.url.path, parsed, lambda: _answer(fake, ENDPOINTS, request, raw)

    return logging_app(fake, read, _response, LOGGED_HEADERS)


def _answer(
    fake: FakeGitHub, endpoints: list[Endpoint[Ctx, Reply]], request: Request, raw: bytes
) -> Reply:
    if fake.clock.seconds >= fake.rate_reset:  # a new window: the budget refills
        fake.rate_remaining = fake.rate_limit
        fake.rate_reset = fake.clock.seconds + fake.rate_window
    method, path = request.method, request.url.path
    if not _authorized(fake, request.headers.get("authorization")):
        return _error(fake, ApiError(401, "Bad credentials"))
    failure = fake.scripted_failure(method, path, dict(request.query_params))
    if failure is not None:
        return _scripted(fake, failure)
    endpoint, params = route(endpoints, method, path)
    if fake.rate_remaining <= 0 and not (endpoint and endpoint.free):
        message = (
            f"API rate limit exceeded for user ID {user_id(fake.login)}. If you reach out to "
            f"GitHub Support for help, please include the request ID {_request_id()}."
        )
        return _error(fake, ApiError(fake.primary_status, message, docs=RATE_DOCS))
    parsed: Any = None
    try:
        if endpoint is None:
            raise not_found()
        if raw.strip():
            try:
                parsed = json.loads(raw)
            except ValueError:
                raise ApiError(400, "Problems parsing JSON") from None
        # A GraphQL query is a POST but reads: write refusals leave it alone.
        writes = method in WRITE_METHODS and not path.endswith("/graphql")
        if writes and fake.refusal is not None:
            raise _refused(*fake.refusal)
        if writes and (repo := fake.repos.get(_repo_of(path))) is not None and repo.archived:
            raise ApiError(403, "Repository was archived so is read-only.")
        ctx = Ctx(fake, request, params, parsed)
        reply = endpoint.handler(ctx)
        if ctx.link:
            reply.headers["link"] = ctx.link
    except ApiError as exc:
        reply = Reply(exc.status, exc.body, dict(exc.headers))
    if method in ("GET", "HEAD") and reply.status == 200:
        etag = 'W/"' + hashlib.sha256(_dump(reply.body)).hexdigest()[:32] + '"'
        reply.headers["etag"] = etag
        reply.headers["cache-control"] = "private, max-age=60, s-maxage=60"
        if _etag_matches(request.headers.get("if-none-match"), etag):
            return _with_rate(fake, Reply(304, None, reply.headers))
    if endpoint is None or not endpoint.free:
        fake.rate_remaining = max(0, fake.rate_remaining - 1)
    return _with_rate(fake, reply)


def _repo_of(path: str) -> str:
    """``owner/name`` of a ``/repos/owner/name/…`` path, else ``""``."""
    parts = path.strip("/").split("/")
    return "/".join(parts[1:3]) if len(parts) >= 3 and parts[0] == "repos" else ""


def _authorized(fake: FakeGitHub, header: str | None) -> bool:
    if not header:
        return False
    scheme, _, token = header.strip().partition(" ")
    return scheme.lower() in ("bearer", "token") and token.strip() == fake.token


def _etag_matches(header: str | None, etag: str) -> bool:
    """Weak comparison, as HTTP specifies for If-None-Match."""
    if not header:
        return False
    bare = etag.removeprefix("W/")
    candidates = [c.strip().removeprefix("W/") for c in header.split(",")]
    return "*" in candidates or bare in candidates


def _scripted(fake: FakeGitHub, failure: ScriptedFailure) -> Reply:
    status = failure.status
    if status >= 500:
        if failure.message is None and status in (502, 503, 504):
            html = Reply(status, _HTML_5XX, {"content-type": "text/html; charset=utf-8"})
            return _with_rate(fake, html)
        return _error(fake, ApiError(status, failure.message or "Server Error"))
    headers = {} if failure.retry_after is None else {"retry-after": str(failure.retry_after)}
    if status in (403, 429):
        message = failure.message or SECONDARY_MESSAGE.format(rid=_request_id())
        docs = f"{RATE_DOCS}#about-secondary-rate-limits"
        return _error(fake, ApiError(status, message, headers=headers, docs=docs))
    return _error(fake, ApiError(status, failure.message or "Error", headers=headers))


def _refused(status: int, message: str | None) -> ApiError:
    if status == 422:
        return validation_failed(
            {"code": "custom", "message": message or "The repository refuses this change."}
        )
    return ApiError(status, message or "Resource not accessible by personal access token")


def _error(fake: FakeGitHub, exc: ApiError) -> Reply:
    return _with_rate(fake, Reply(exc.status, exc.body, dict(exc.headers)))


def _with_rate(fake: FakeGitHub, reply: Reply) -> Reply:
    reply.headers |= {
        "x-ratelimit-limit": str(fake.rate_limit),
        "x-ratelimit-remaining": str(fake.rate_remaining),
        "x-ratelimit-used": str(max(0, fake.rate_limit - fake.rate_remaining)),
        "x-ratelimit-reset": str(fake.rate_reset),
        "x-ratelimit-resource": "core",
        "x-github-media-type": "github.v3; format=json",
        "x-github-api-version-selected": "2022-11-28",
        "x-github-request-id": _request_id(),
    }
    return reply


def _request_id() -> str:
    return uuid.uuid4().hex[:20].upper()


def _dump(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _response(reply: Reply) -> Response:
    if reply.body is None or reply.status in (204, 304):
        return Response(status_code=reply.status, headers=reply.headers)
    if isinstance(reply.body, str):
        return Response(reply.body, status_code=reply.status, headers=reply.headers)
    headers = {"content-type": "application/json; charset=utf-8", **reply.headers}
    return Response(_dump(reply.body), status_code=reply.status, headers=headers)
