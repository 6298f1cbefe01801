"""A fake Linear GraphQL API for tests of the Linear provider: every request is parsed,
validated and executed by graphql-core against Linear's published schema
(``tests/fixtures/linear``, MIT, see its ``SOURCE.md``), over the state of
``fake_linear_state``. What it answers as Linear does: Relay pages (``first``/``after``,
keyset cursors, most recently updated or created first), the ``IssueFilter`` forms the
provider sends, ``issue(id:)`` by identifier (an old one after a team move) and "Entity
not found", mutations, API-key or OAuth auth, both rate-limit budgets on every answer
with ``X-Complexity`` (estimated as Linear documents it: a point an object, a tenth a
field, connections times ``first``), and ``RATELIMITED`` once a budget is spent.

The request log names each request by what it does, so the shared fake-tracker tools
(failures, stalls, holds, ``writes``) apply: a query is ``/graphql/<OperationName>``, a
mutation ``/issues/<identifier>/<field>`` (``/issues`` for a create).

    fake = FakeLinear()
    async with serve_on_loopback(fake) as api_url:  # http://127.0.0.1:PORT/graphql
        ...
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import hmac
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    build_schema,
    graphql_sync,
    parse,
    value_from_ast_untyped,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from tests.support.clock import parse_iso
from tests.support.fake_linear_state import Comment, FakeLinearState, Issue, iso, new_id
from tests.support.fake_tracker import COMMON_LOGGED_HEADERS, logging_app

SCHEMA = Path(__file__).parent.parent / "fixtures" / "linear" / "schema.graphql.gz"
CLOSED = ("completed", "canceled", "duplicate")


@functools.cache
def linear_schema() -> GraphQLSchema:
    """Linear's schema, built once per test process (about a second)."""
    return build_schema(gzip.decompress(SCHEMA.read_bytes()).decode())


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] | None = None


def _error(status: int, message: str, code: str) -> Reply:
    return Reply(status, {"errors": [{"message": message, "extensions": {"code": code}}]})


def cursor_of(key: tuple[int, str]) -> str:
    return base64.b64encode(f"{key[0]}:{key[1]}".encode()).decode()


def key_of(cursor: str) -> tuple[int, str]:
    stamp, _, ident = base64.b64decode(cursor).decode().partition(":")
    return int(stamp), ident


class FakeLinear(FakeLinearState):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        linear_schema()  # built now (once per process), not while a test waits on a sync

    def create_app(self) -> Starlette:
        def read(request: Request, raw: bytes) -> tuple[str, Any, Callable[[], Reply]]:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            path = self._logical_path(body)
            return path, body, lambda: self._answer(request, path, body)

        def respond(reply: Reply) -> Response:
            return Response(
                json.dumps(reply.body).encode(),
                reply.status,
                headers=reply.headers,
                media_type="application/json",
            )

        return logging_app(self, read, respond, COMMON_LOGGED_HEADERS)

    # -- the request step -------------------------------------------------------------
    def _logical_path(self, body: Any) -> str:
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return "/graphql"
        try:
            document = parse(body["query"])
        except GraphQLError:
            return "/graphql"
        ops = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if not ops:
            return "/graphql"
        op = ops[0]
        if op.operation.value != "mutation":
            return f"/graphql/{op.name.value if op.name else 'query'}"
        field = next(s for s in op.selection_set.selections if isinstance(s, FieldNode))
        variables = body.get("variables") or {}
        given = variables.get("input") or {}
        target = variables.get("id") or given.get("issueId") or given.get("agentSessionId")
        found = next(
            (
                i
                for i in self.issues.values()
                if target in (i.id, i.identifier, *i.previous, *(x.id for x in i.sessions))
            ),
            None,
        )
        if field.name.value == "issueCreate" or found is None:
            return "/issues"
        return f"/issues/{found.identifier}/{field.name.value}"

    def _budget_headers(self, cost: int) -> dict[str, str]:
        return {
            "X-RateLimit-Requests-Limit": str(self.limits[0]),
            "X-RateLimit-Requests-Remaining": str(max(0, self.requests_left)),
            "X-RateLimit-Requests-Reset": str(self.reset_ms),
            "X-RateLimit-Complexity-Limit": str(self.limits[1]),
            "X-RateLimit-Complexity-Remaining": str(max(0, self.complexity_left)),
            "X-RateLimit-Complexity-Reset": str(self.reset_ms),
            "X-Complexity": str(cost),
        }

    def _answer(self, request: Request, path: str, body: Any) -> Reply:
        if request.headers.get("authorization", "") != self.auth_headers()["Authorization"]:
            # Linear's code for it; the HTTP status it sends with it is not documented.
            return _error(401, "Authentication required, not authenticated", "AUTHENTICATION_ERROR")
        failure = self.scripted_failure(request.method, path, {})
        if failure is not None:
            reply = _error(
                failure.status,
                failure.message or "Rate limit exceeded",
                {429: "RATELIMITED", 400: "INVALID_INPUT", 403: "FORBIDDEN"}.get(
                    failure.status, "INTERNAL"
                ),
            )
            if failure.retry_after is not None:
                reply.headers = {"Retry-After": str(failure.retry_after)}
            return reply
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return _error(400, "Must provide query string.", "BAD_REQUEST")
        if self.clock.ms >= self.reset_ms:
            self.requests_left, self.complexity_left = self.limits
            self.reset_ms = self.clock.ms + 3_600_000
        document = parse(body["query"])
        variables = body.get("variables") or {}
        cost = complexity(document, variables)
        if self.requests_left <= 0 or self.complexity_left < cost:
            reply = _error(400, "Rate limit exceeded", "RATELIMITED")
            reply.headers = self._budget_headers(0)
            return reply
        if path.startswith("/issues") and self.refusal is not None:
            return _error(self.refusal[0], self.refusal[1] or "Forbidden", "FORBIDDEN")
        self.requests_left -= 1
        self.complexity_left -= cost
        self.complexities.append(cost)
        result = graphql_sync(
            linear_schema(), body["query"], root_value=Root(self), variable_values=variables
        )
        answer: dict[str, Any] = {"data": result.data}
        if result.errors:
            answer["errors"] = [e.formatted for e in result.errors]
        invalid = result.data is None and result.errors and not any(e.path for e in result.errors)
        return Reply(400 if invalid else 200, answer, self._budget_headers(cost))

    # -- the filter -------------------------------------------------------------------
    def matches(self, issue: Issue, wanted: Mapping[str, Any]) -> bool:
        for key, test in wanted.items():
            if key == "and":
                ok = all(self.matches(issue, part) for part in test)
            elif key == "or":
                ok = any(self.matches(issue, part) for part in test)
            elif key == "team":
                ok = _compare(issue.team.key, test["key"])
            elif key in ("updatedAt", "createdAt"):
                stamp = issue.updated_ms if key == "updatedAt" else issue.created_ms
                ok = _compare_time(stamp, test)
            elif key == "state":
                ok = _compare(issue.state.type, test["type"])
            elif key == "labels":
                names = [self.labels[i].name for i in issue.label_ids]
                ok = any(_compare(n, test["some"]["name"]) for n in names)
            elif key == "project":
                ok = issue.project is not None and _compare(
                    issue.project, test.get("name") or test.get("id")
                )
            elif key in ("assignee", "delegate"):
                held = issue.assignee if key == "assignee" else issue.delegate
                if "null" in test:
                    ok = (held is None) == test["null"]
                else:
                    ok = held is not None and _compare(held, test["id"])
            elif key == "cycle":
                if "isActive" in test:
                    ok = issue.cycle is not None and issue.cycle_active == test["isActive"]["eq"]
                else:
                    ok = issue.cycle == test["number"]["eq"]
            else:
                raise GraphQLError(f"the fake does not filter issues by {key}")
            if not ok:
                return False
        return True


def _compare(value: Any, test: Mapping[str, Any]) -> bool:
    for op, want in test.items():
        if op == "eq" and value != want:
            return False
        if op == "eqIgnoreCase" and str(value).casefold() != str(want).casefold():
            return False
        if op == "in" and value not in want:
            return False
        if op == "nin" and value in want:
            return False
        if op not in ("eq", "eqIgnoreCase", "in", "nin"):
            raise GraphQLError(f"the fake does not compare with {op}")
    return True


def _compare_time(stamp: int, test: Mapping[str, Any]) -> bool:
    checks = {"gte": stamp.__ge__, "gt": stamp.__gt__, "lte": stamp.__le__, "lt": stamp.__lt__}
    return all(checks[op](parse_iso(want)) for op, want in test.items())


class Root:
    """The root fields the provider uses, over the fake's state."""

    def __init__(self, fake: FakeLinear) -> None:
        self.fake = fake

    def _issue(self, key: str) -> Issue:
        try:
            return self.fake.issue(key) if "-" in key[:8] else self.fake.issues[key]
        except KeyError:
            raise GraphQLError("Entity not found: Issue") from None

    # -- queries ------------------------------------------------------------------------
    def issues(self, info: Any, **args: Any) -> dict[str, Any]:
        fake = self.fake
        order = args.get("orderBy") or "createdAt"
        found = [
            i
            for i in fake.issues.values()
            if (args.get("includeArchived") or i.archived_ms is None)
            and fake.matches(i, args.get("filter") or {})
        ]

        def key(i: Issue) -> tuple[int, str]:
            return (i.updated_ms if order == "updatedAt" else i.created_ms, i.id)

        found.sort(key=key, reverse=True)  # most recent first
        if args.get("after"):
            edge = key_of(args["after"])
            found = [i for i in found if key(i) < edge]
        first = args.get("first") or 50
        page = found[:first]
        return {
            "nodes": [fake.render(i) for i in page],
            "pageInfo": {
                "hasNextPage": len(found) > first,
                "endCursor": cursor_of(key(page[-1])) if page else None,
                "hasPreviousPage": bool(args.get("after")),
                "startCursor": cursor_of(key(page[0])) if page else None,
            },
        }

    def issue(self, info: Any, id: str) -> dict[str, Any]:
        return self.fake.render(self._issue(id))

    def teams(self, info: Any, **args: Any) -> dict[str, Any]:
        wanted = (args.get("filter") or {}).get("key")
        return {
            "nodes": [
                {"id": t.id, "key": t.key, "name": t.key}
                for t in self.fake.teams.values()
                if wanted is None or _compare(t.key, wanted)
            ][: args.get("first") or 50]
        }

    def issueLabels(self, info: Any, **args: Any) -> dict[str, Any]:
        names = ((args.get("filter") or {}).get("name") or {}).get("in") or []
        return {
            "nodes": [
                {
                    "id": x.id,
                    "name": x.name,
                    "team": None if x.team_id is None else {"id": x.team_id},
                }
                for x in self.fake.labels.values()
                if x.name in names
            ]
        }

    def projects(self, info: Any, **args: Any) -> dict[str, Any]:
        name = (((args.get("filter") or {}).get("name") or {}).get("eqIgnoreCase") or "").casefold()
        found = [pid for pid, n in self.fake.projects.items() if n.casefold() == name]
        return {"nodes": [{"id": pid} for pid in found]}

    def team(self, info: Any, id: str) -> dict[str, Any]:
        (team,) = [t for t in self.fake.teams.values() if id in (t.id, t.key)]
        active = team.active_cycle
        return {
            "id": team.id,
            "key": team.key,
            "activeCycle": None if active is None else {"id": f"cycle-{team.key}-{active}"},
            "cycles": {"nodes": [{"id": f"cycle-{team.key}-{active}"}] if active else []},
        }

    def user(self, info: Any, id: str) -> dict[str, Any]:
        if id not in self.fake.users:
            raise GraphQLError("Entity not found: User")
        return vars(self.fake.users[id]) | {"isMe": id == self.fake.viewer.id}

    def viewer(self, info: Any) -> dict[str, Any]:
        return vars(self.fake.viewer)

    # -- mutations ----------------------------------------------------------------------
    def issueUpdate(self, info: Any, id: str, input: dict[str, Any]) -> dict[str, Any]:
        fake, issue = self.fake, self._issue(id)
        if "stateId" in input:
            (issue.state,) = [s for s in issue.team.states if s.id == input["stateId"]]
        for field in ("assigneeId", "delegateId"):
            if field in input and input[field] is not None and input[field] not in fake.users:
                raise GraphQLError(f"Entity not found: {field}")
        if "assigneeId" in input:
            issue.assignee = input["assigneeId"]
        if "delegateId" in input:
            fake.set_delegate(issue, input["delegateId"])
        for label in input.get("addedLabelIds") or []:
            if label not in fake.labels:
                raise GraphQLError("Entity not found: IssueLabel")
            if label not in issue.label_ids:
                issue.label_ids.append(label)
        removed = set(input.get("removedLabelIds") or [])
        issue.label_ids = [x for x in issue.label_ids if x not in removed]
        if "description" in input:
            issue.description = input["description"]
        if "title" in input:
            issue.title = input["title"]
        fake.touch(issue)
        return {"success": True, "issue": fake.render(issue), "lastSyncId": 0.0}

    def issueCreate(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        fake = self.fake
        (team,) = [t for t in fake.teams.values() if t.id == input["teamId"]]
        issue = fake.new_issue(input.get("title") or "", input.get("description"), team=team.key)
        for label in input.get("labelIds") or []:
            if label not in fake.labels:
                raise GraphQLError("Entity not found: IssueLabel")
            issue.label_ids.append(label)
        if input.get("projectId") is not None:
            issue.project = fake.projects[input["projectId"]]
        if input.get("cycleId") is not None:
            issue.cycle = int(input["cycleId"].rsplit("-", 1)[1])
            issue.cycle_active = issue.cycle == team.active_cycle
        for field in ("assigneeId", "delegateId"):
            if input.get(field) is not None and input[field] not in fake.users:
                raise GraphQLError(f"Entity not found: {field}")
        issue.assignee = input.get("assigneeId")
        fake.set_delegate(issue, input.get("delegateId"))
        return {"success": True, "issue": fake.render(issue), "lastSyncId": 0.0}

    def commentCreate(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        fake, issue = self.fake, self._issue(input["issueId"])
        issue.comments.append(Comment(new_id(), input["body"], fake.clock.ms, fake.viewer.id))
        fake.touch(issue)
        return {"success": True, "lastSyncId": 0.0}

    def agentActivityCreate(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        """An agent's activity on its session: only the session's own app user may post
        (the token's viewer), and the content is a type the schema names, with a body."""
        fake = self.fake
        sessions = [x for i in fake.issues.values() for x in i.sessions]
        found = [x for x in sessions if x.id == input["agentSessionId"]]
        if not found:
            raise GraphQLError("Entity not found: AgentSession")
        content = input["content"]
        kinds = {"thought", "response", "action", "elicitation", "error"}
        if content.get("type") not in kinds or not isinstance(content.get("body"), str):
            raise GraphQLError("Invalid activity content")
        if found[0].app_user != fake.viewer.id:
            raise GraphQLError("Forbidden: not this session's agent")
        found[0].activities.append((content["type"], content["body"]))
        return {"success": True, "lastSyncId": 0.0}


def complexity(document: Any, variables: Mapping[str, Any]) -> int:
    """A query's points as Linear documents them: an object 1, a field 0.1, each
    connection's children times its ``first`` (50 when not given); rounded up."""
    values = dict(variables)
    fragments = {d.name.value: d for d in document.definitions if d.kind == "fragment_definition"}

    def included(node: Any) -> bool:
        return all(
            value_from_ast_untyped(d.arguments[0].value, values)
            for d in node.directives or ()
            if d.name.value == "include" and d.arguments
        )

    def cost(selection_set: SelectionSetNode | None) -> float:
        total = 0.0
        for node in selection_set.selections if selection_set else ():
            if not included(node):
                continue
            if isinstance(node, FragmentSpreadNode):
                total += cost(fragments[node.name.value].selection_set)
            elif isinstance(node, InlineFragmentNode):
                total += cost(node.selection_set)
            elif isinstance(node, FieldNode) and node.selection_set is None:
                total += 0.1
            elif isinstance(node, FieldNode) and node.selection_set is not None:
                inner = node.selection_set
                names = {s.name.value for s in inner.selections if isinstance(s, FieldNode)}
                if "nodes" in names or "edges" in names:
                    args = {
                        a.name.value: value_from_ast_untyped(a.value, values)
                        for a in node.arguments or ()
                    }
                    total += (args.get("first") or 50) * cost(inner)
                else:
                    total += 1 + cost(inner)
        return total

    ops = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    return math.ceil(sum(cost(op.selection_set) for op in ops))


def linear_webhook(
    fake: FakeLinear,
    secret: str,
    issue: Issue,
    *,
    kind: str = "Issue",
    action: str = "update",
    at_ms: int | None = None,
    delivery: str | None = None,
) -> tuple[dict[str, str], bytes]:
    """A signed delivery about ``issue`` in the shape of Linear's ``EntityWebhookPayload``
    (``webhookTimestamp`` now unless ``at_ms``)."""
    data: dict[str, Any]
    if kind == "Issue":
        data = {
            "id": issue.id,
            "identifier": issue.identifier,
            "title": issue.title,
            "teamId": issue.team.id,
            "stateId": issue.state.id,
            "previousIdentifiers": list(issue.previous),
            "updatedAt": iso(issue.updated_ms),
        }
    else:
        data = {
            "id": new_id(),
            "issueId": issue.id,
            "issue": {"id": issue.id, "identifier": issue.identifier, "title": issue.title},
        }
    payload = {
        "action": action,
        "type": kind,
        "data": data,
        "url": f"https://linear.app/acme/issue/{issue.identifier}",
        "organizationId": new_id(),
        "webhookId": new_id(),
        "webhookTimestamp": round(time.time() * 1000) if at_ms is None else at_ms,
        "createdAt": iso(fake.clock.ms),
    }
    body = json.dumps(payload).encode()
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/json",
        "linear-signature": signature,
        "linear-delivery": delivery or new_id(),
        "linear-event": kind,
    }
    return headers, body
