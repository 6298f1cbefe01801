"""The fake GitLab's request context and answers: the error bodies GitLab sends, a reply,
the request as an endpoint sees it (``Ctx``: its project, issue or merge request, its
arguments, and offset or keyset pagination of what it lists) and the endpoint table's
row. The app (``fake_gitlab_app``) and the endpoints (``fake_gitlab_endpoints``) use it."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request

from tests.support.fake_gitlab_model import JSON, Issue, MergeRequest, Project
from tests.support.fake_gitlab_render import Shapes

if TYPE_CHECKING:
    from tests.support.fake_gitlab_state import FakeGitLab

T = TypeVar("T")
API_PREFIX = "/api/v4"
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

    def group(self) -> str:
        """The group at ``:id`` (a numeric id or a URL-encoded full path): its path."""
        group = self.fake.find_group(self.params["id"])
        if group is None:
            raise not_found("Group")
        return group

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
        per_page = int_param(self, "per_page", 20)
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
        page = max(int_param(self, "page", 1), 1)
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
        if self.fake.endless_pages == self.raw_path:
            next_page, out_of_range = page + 1, False
            page = min(page, total_pages)
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
            after = decode_cursor(cursor, order)
            if descending:
                ordered = [i for i in ordered if sort_key(i) < after]
            else:
                ordered = [i for i in ordered if sort_key(i) > after]
        page = ordered[:per_page]
        if len(ordered) > per_page:
            last: Any = page[-1]
            next_cursor = encode_cursor(order, key(last), int(last.id))
            self.headers["link"] = f'<{self._url(cursor=next_cursor)}>; rel="next"'
        return page

    def _url(self, **changes: str) -> str:
        """This request's absolute URL (raw path kept) with query ``changes``."""
        query = dict(parse_qsl(self.request.url.query, keep_blank_values=True)) | changes
        base = str(self.request.base_url).rstrip("/")
        return f"{base}{self.raw_path}?{urlencode(query)}"


def int_param(ctx: Ctx, name: str, default: int) -> int:
    value = ctx.query(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise param_error(f"{name} is invalid") from None


def encode_cursor(order: str, value: Any, item_id: int) -> str:
    """Opaque like GitLab's: url-safe base64 of ``{"updated_at": …, "id": "…",
    "_kd": "n"}`` (a timestamp travels as epoch ms here)."""
    payload: JSON = {"id": str(item_id), "_kd": "n"}
    if order != "id":
        payload = {order: value} | payload
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def decode_cursor(cursor: str, order: str) -> tuple[Any, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        item_id = int(data["id"])
        value = item_id if order == "id" else data[order]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise message(400, "400 Bad request - Invalid cursor value") from None
    return (value, item_id)
