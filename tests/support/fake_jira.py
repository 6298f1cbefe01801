"""A fake Jira Cloud REST API (v3) for tests of the Jira provider: the state of
``fake_jira_state`` served by one Starlette app with Jira's enhanced JQL search (the
forms of JQL the provider sends, offset-backed ``nextPageToken`` pages, so an edit during
a walk shifts the ordering under the token as it can on a real site), issues, remote
links, transitions with screen fields, assignees, comments with entity properties, Basic
and bearer auth, 429s with Jira's rate-limit headers, and webhook deliveries.

    fake = FakeJira()
    async with serve_on_loopback(fake) as site:  # http://127.0.0.1:PORT
        ...
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from tests.support.fake_jira_state import (
    PROJECT,
    STATUSES,
    Comment,
    FakeJiraState,
    Issue,
)
from tests.support.fake_tracker import COMMON_LOGGED_HEADERS, logging_app

LOGGED_HEADERS = COMMON_LOGGED_HEADERS
# "Open, or changed since": the horizon of an import, read before the clauses it holds.
_OPEN_OR_SINCE = re.compile(
    r'\(statusCategory\s*!=\s*Done OR updated\s*>=\s*"(?P<horizon>\d{4}-\d\d-\d\d \d\d:\d\d)"\)'
)
_CLAUSES = (
    re.compile(r'project\s*=\s*"?(?P<project>[A-Z][A-Z0-9_]*)"?'),
    re.compile(r"\(labels IS EMPTY OR labels NOT IN \((?P<notin>[^)]*)\)\)"),
    re.compile(r'(?P<named>fixVersion|issuetype|assignee)\s*=\s*"(?P<value>[^"]*)"'),
    re.compile(r'(?P<field>updated|created)\s*>=\s*"(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d)"'),
    re.compile(r"statusCategory\s*!=\s*(?P<notcat>Done)"),
    re.compile(r'labels\s*=\s*"?(?P<label>[\w.-]+)"?'),
)


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] | None = None


class JqlError(ValueError):
    pass


def _error(status: int, message: str, errors: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"errorMessages": [message] if message else [], "errors": errors or {}})


def _open_or_since(since: int) -> Callable[[Issue], bool]:
    return lambda i: STATUSES[i.status][0] != "done" or i.updated_ms >= since


class FakeJira(FakeJiraState):
    """The fake site: its state (``FakeJiraState``) and its HTTP side."""

    def create_app(self) -> Starlette:
        def read(request: Request, raw: bytes) -> tuple[str, Any, Callable[[], Reply]]:
            try:
                body = json.loads(raw) if raw.strip() else None
            except ValueError:
                body = raw.decode(errors="replace")
            return request.url.path, body, lambda: self._answer(request, body)

        def respond(reply: Reply) -> Response:
            content = b"" if reply.body is None else json.dumps(reply.body).encode()
            return Response(
                content, reply.status, headers=reply.headers, media_type="application/json"
            )

        return logging_app(self, read, respond, LOGGED_HEADERS)

    # -- the request step ---------------------------------------------------------
    def _authorized(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return header in (self.auth_headers()["Authorization"], f"Bearer {self.token}")

    def _answer(self, request: Request, body: Any) -> Reply:
        if not self._authorized(request):
            return _error(401, "Client must be authenticated to access this resource.")
        method, path = request.method, request.url.path
        failure = self.scripted_failure(method, path, dict(request.query_params))
        if failure is not None:
            return self._scripted(failure.status, failure.retry_after, failure.message)
        limited = self._over_budget()
        if limited is not None:
            return limited
        if (
            method in ("POST", "PUT", "DELETE")
            and self.refusal
            and path != "/rest/api/3/search/jql"
        ):
            return _error(self.refusal[0], self.refusal[1] or "You do not have permission.")
        params = dict(request.query_params)
        for verb, pattern, handler in self._routes():
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                return handler(*match.groups(), params=params, body=body)
        return _error(404, f"No route for {method} {path}")

    def _over_budget(self) -> Reply | None:
        """With a budget set (``set_rate_limit``), each request spends one until the
        window resets; past it, a 429 whose ``Retry-After`` is the rest of the window."""
        if self.rate_budget is None:
            return None
        rest = self.rate_reset_s - self.clock.seconds
        if rest <= 0:
            self.rate_budget = None
            return None
        if self.rate_budget == 0:
            return self._scripted(429, int(rest), None)
        self.rate_budget -= 1
        return None

    def _scripted(self, status: int, retry_after: int | None, message: str | None) -> Reply:
        headers: dict[str, str] = {}
        if status == 429:
            reset = datetime.fromtimestamp(self.clock.seconds + (retry_after or 60), UTC)
            headers = {
                "X-RateLimit-Limit": "100",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": reset.strftime("%Y-%m-%dT%H:%MZ"),
                "RateLimit-Reason": "jira-burst-based",
            }
        if retry_after is not None and status in (429, 503):  # where Jira documents it
            headers["Retry-After"] = str(retry_after)
        reply = _error(status, message or "Rate limit exceeded.")
        return Reply(reply.status, reply.body, headers)

    def _routes(self) -> list[tuple[str, str, Callable[..., Reply]]]:
        api = "/rest/api/3"
        return [
            ("POST", f"{api}/search/jql", lambda **kw: self._search(kw["body"])),
            ("GET", f"{api}/myself", lambda **kw: Reply(200, self._myself())),
            ("GET", f"{api}/project/([A-Z0-9_]+)", self._project),
            ("GET", f"{api}/mypermissions", self._permissions),
            ("POST", f"{api}/issue", lambda **kw: self._create(kw["body"])),
            ("GET", f"{api}/issue/([A-Z0-9_]+-\\d+)", self._get_issue),
            ("PUT", f"{api}/issue/([A-Z0-9_]+-\\d+)", self._edit),
            ("GET", f"{api}/issue/([A-Z0-9_]+-\\d+)/remotelink", self._links),
            ("GET", f"{api}/issue/([A-Z0-9_]+-\\d+)/transitions", self._transitions),
            ("POST", f"{api}/issue/([A-Z0-9_]+-\\d+)/transitions", self._transition),
            ("PUT", f"{api}/issue/([A-Z0-9_]+-\\d+)/assignee", self._assign),
            ("GET", f"{api}/issue/([A-Z0-9_]+-\\d+)/comment", self._comments),
            ("POST", f"{api}/issue/([A-Z0-9_]+-\\d+)/comment", self._comment),
        ]

    # -- reads --------------------------------------------------------------------
    def _myself(self) -> dict[str, Any]:
        return {**self.user_json(self.account), "timeZone": self.time_zone}

    def _project(self, key: str, **_: Any) -> Reply:
        if key not in self.projects:
            return _error(404, f"No project could be found with key '{key}'.")
        return Reply(200, {"id": self.projects[key], "key": key, "name": "Demo"})

    def _permissions(self, *, params: dict[str, str], **_: Any) -> Reply:
        """The caller's permissions asked for: none of the writing ones while writes are
        refused."""
        if params.get("projectKey") not in (None, *self.projects):
            return _error(404, f"No project could be found with key '{params['projectKey']}'.")
        have = self.refusal is None
        keys = [key for key in params.get("permissions", "").split(",") if key]
        found = {key: {"key": key, "havePermission": have} for key in keys}
        return Reply(200, {"permissions": found})

    def _found(self, key: str) -> Issue | Reply:
        issue = self.by_key(key)
        if issue is None:
            return _error(404, "Issue does not exist or you do not have permission to see it.")
        return issue

    def _get_issue(self, key: str, *, params: dict[str, str], **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        fields = params.get("fields")
        return Reply(200, self.issue_json(issue, fields.split(",") if fields else None))

    def _links(self, key: str, **_: Any) -> Reply:
        issue = self._found(key)
        return issue if isinstance(issue, Reply) else Reply(200, list(issue.remote_links))

    def _comments(self, key: str, *, params: dict[str, str], **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        expand = "properties" in params.get("expand", "")
        found = sorted(issue.comments, key=lambda c: c.created_ms, reverse=True)[:100]
        items = [self.comment_json(c, expand) for c in found]
        return Reply(200, {"comments": items, "maxResults": 100, "startAt": 0, "total": len(items)})

    def _transitions(self, key: str, *, params: dict[str, str], **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        expand = "transitions.fields" in params.get("expand", "")
        offered = [
            self.transition_json(t, expand) for t in self.workflow if t.applies(issue.status)
        ]
        return Reply(200, {"expand": "transitions", "transitions": offered})

    def _search(self, body: Any) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("jql"), str):
            return _error(400, "The request body must carry jql.")
        try:
            matched = self._query(body["jql"])
        except JqlError as exc:
            return _error(400, f"Error in the JQL Query: {exc}")
        token = body.get("nextPageToken")
        offset = int(base64.b64decode(token).decode().split(":")[1]) if token else 0
        size = min(int(body.get("maxResults") or 50), self.page_size_cap)
        if self.endless_pages:
            offset = min(offset, max(0, len(matched) - size))
        page = matched[offset : offset + size]
        fields = body.get("fields")
        props = body.get("properties") or []
        found: dict[str, Any] = {
            "isLast": offset + size >= len(matched) and not self.endless_pages,
            "issues": [self.issue_json(i, fields, props) for i in page],
        }
        if not found["isLast"]:
            found["nextPageToken"] = base64.b64encode(f"offset:{offset + size}".encode()).decode()
        return Reply(200, found)

    def _query(self, jql: str) -> list[Issue]:
        parts = re.split(r"\s+ORDER BY\s+", jql, maxsplit=1)
        where, order = parts[0], parts[1] if len(parts) > 1 else "created DESC"
        tests: list[Callable[[Issue], bool]] = []
        for match in _OPEN_OR_SINCE.finditer(where):
            tests.append(_open_or_since(self.minute_ms(match.group("horizon"))))
        where = _OPEN_OR_SINCE.sub("", where)
        rest = where
        for clause in _CLAUSES:
            for match in clause.finditer(where):
                rest = rest.replace(match.group(0), "", 1)
                tests.append(self._test(match.groupdict()))
        if re.sub(r"\bAND\b|[()\s]", "", rest):
            raise JqlError(f"the fake does not read {rest.strip()!r}")
        chosen = [i for i in self.issues.values() if all(t(i) for t in tests)]
        for term in reversed([t.strip() for t in order.split(",")]):
            name, _, direction = term.partition(" ")
            key: Callable[[Issue], Any] = {
                "updated": lambda i: i.updated_ms,
                "created": lambda i: i.created_ms,
                "key": lambda i: (i.key.split("-")[0], int(i.key.split("-")[1])),
            }[name]
            chosen.sort(key=key, reverse=direction.upper() == "DESC")
        return chosen

    def _test(self, groups: dict[str, str | None]) -> Callable[[Issue], bool]:
        if groups.get("project"):
            if groups["project"] not in self.projects:
                raise JqlError(
                    f"The value '{groups['project']}' does not exist for the field 'project'."
                )
            return lambda i: i.key.startswith(f"{groups['project']}-")
        if groups.get("when"):
            since = self.minute_ms(str(groups["when"]))
            if groups["field"] == "updated":
                return lambda i: i.updated_ms >= since
            return lambda i: i.created_ms >= since
        if groups.get("notin") is not None:
            excluded = set(re.findall(r'"([^"]*)"', str(groups["notin"])))
            return lambda i: not excluded & set(i.labels)
        if groups.get("named"):
            value = groups["value"]
            read: Callable[[Issue], list[str | None]] = {
                "fixVersion": lambda i: list(i.fix_versions),
                "issuetype": lambda i: [i.issue_type],
                "assignee": lambda i: [i.assignee],
            }[str(groups["named"])]
            return lambda i: value in read(i)
        if groups.get("notcat"):
            return lambda i: STATUSES[i.status][0] != "done"
        return lambda i: groups["label"] in i.labels

    # -- writes -------------------------------------------------------------------
    def _create(self, body: Any) -> Reply:
        fields = body.get("fields") if isinstance(body, dict) else None
        if not isinstance(fields, dict) or not fields.get("summary"):
            return _error(400, "", {"summary": "You must specify a summary of the issue."})
        where = str((fields.get("project") or {}).get("key") or PROJECT)
        if where not in self.projects:
            return _error(400, "", {"project": "valid project is required"})
        issue = self.add_issue(where, fields["summary"])
        issue.description = fields.get("description")
        issue.labels = list(fields.get("labels") or [])
        issue.issue_type = str((fields.get("issuetype") or {}).get("name") or "Task")
        issue.fix_versions = [str(v["name"]) for v in fields.get("fixVersions") or ()]
        issue.assignee = (fields.get("assignee") or {}).get("accountId")
        for prop in body.get("properties") or []:
            issue.properties[prop["key"]] = prop["value"]
        return Reply(201, {"id": str(10000 + issue.number), "key": issue.key, "self": "x"})

    def _edit(self, key: str, *, body: Any, **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        body = body if isinstance(body, dict) else {}
        for op in (body.get("update") or {}).get("labels") or []:
            if "add" in op and op["add"] not in issue.labels:
                issue.labels.append(op["add"])
            if "remove" in op and op["remove"] in issue.labels:
                issue.labels.remove(op["remove"])
        fields = body.get("fields") or {}
        if "description" in fields:
            issue.description = fields["description"]
        if "resolution" in fields:
            if STATUSES[issue.status][0] != "done":
                return _error(400, "", {"resolution": "Field 'resolution' cannot be set."})
            issue.resolution = fields["resolution"]["name"]
        self.touch(issue)
        return Reply(204)

    def _transition(self, key: str, *, body: Any, **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        wanted = str(((body or {}).get("transition") or {}).get("id"))
        chosen = next((t for t in self.workflow if t.id == wanted), None)
        if chosen is None or not chosen.applies(issue.status):
            return _error(400, f"Transition id '{wanted}' is not valid for this issue.")
        given = (body or {}).get("fields") or {}
        for name in given:
            if name not in chosen.screen:
                return _error(
                    400,
                    "",
                    {
                        name: f"Field '{name}' cannot be set. It is not on the "
                        "appropriate screen, or unknown."
                    },
                )
        for name, meta in chosen.screen.items():
            if meta.get("required") and name not in given:
                return _error(400, "", {name: f"{meta.get('name', name)} is required."})
        issue.status = chosen.to
        if STATUSES[chosen.to][0] == "done":
            issue.resolution = (
                (given.get("resolution") or {}).get("name") or chosen.resolves or issue.resolution
            )
        else:
            issue.resolution = None
        self.touch(issue)
        return Reply(204)

    def _assign(self, key: str, *, body: Any, **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        account = (body or {}).get("accountId")
        if account is not None and account not in self.assignable:
            return _error(400, "", {"assignee": f"User '{account}' cannot be assigned issues."})
        issue.assignee = account
        self.touch(issue)
        return Reply(204)

    def _comment(self, key: str, *, body: Any, **_: Any) -> Reply:
        issue = self._found(key)
        if isinstance(issue, Reply):
            return issue
        document = (body or {}).get("body")
        if not isinstance(document, dict) or document.get("type") != "doc":
            return _error(400, "", {"comment": "Comment body can not be empty!"})
        comment = Comment(str(self.next_id), document, self.account, self.clock.ms)
        self.next_id += 1
        for prop in (body or {}).get("properties") or []:
            comment.properties[prop["key"]] = prop["value"]
        issue.comments.append(comment)
        self.touch(issue)
        return Reply(201, self.comment_json(comment, True))


# -- webhooks ---------------------------------------------------------------------
def webhook_payload(fake: FakeJira, event: str, issue: Issue) -> dict[str, Any]:
    """A delivery's payload as Jira sends it for ``event`` on ``issue``."""
    payload: dict[str, Any] = {
        "timestamp": fake.clock.ms,
        "webhookEvent": event,
        "user": fake.user_json("557058:human"),
        "issue": fake.issue_json(issue, None),
    }
    if event == "jira:issue_updated":
        payload["issue_event_type_name"] = "issue_generic"
        payload["changelog"] = {"id": "10100", "items": []}
    if event.startswith("comment_") and issue.comments:
        payload["comment"] = fake.comment_json(issue.comments[-1], False)
    return payload


def jira_webhook(
    payload: dict[str, Any], secret: str | None, delivery: str | None = None
) -> tuple[dict[str, str], bytes]:
    """The headers and body of a delivery (signed when the webhook has a ``secret``)."""
    body = json.dumps(payload).encode()
    headers = {
        "content-type": "application/json",
        "x-atlassian-webhook-identifier": delivery or str(uuid.uuid4()),
        "x-atlassian-webhook-flow": "Primary",
    }
    if secret is not None:
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers["x-hub-signature"] = f"sha256={digest}"
    return headers, body
