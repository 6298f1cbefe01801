"""The fake GitHub's GraphQL endpoint (``POST /graphql``, GHES ``/api/graphql``).

A subset of GitHub's public schema, with GitHub's own type and field names (the public
schema description, octokit/graphql-schema), executed by graphql-core over the same
state the REST timeline renders: an issue's ``timelineItems`` (cross-references, Development
links, commit references, closings) and a pull request's ``closingIssuesReferences`` and
comments. A query naming a field outside the subset fails as GitHub fails it: HTTP 200
with ``errors``. Connections page by ``first``/``after`` and ``last``/``before``.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from graphql import DocumentNode, GraphQLError, execute_sync, parse, validate

from tests.support.fake_github_model import JSON, Event, Issue, iso, node_id
from tests.support.fake_github_schema import SCHEMA

if TYPE_CHECKING:
    from tests.support.fake_github_state import FakeGitHub

_ITEM_TYPES = {
    "cross-referenced": "CROSS_REFERENCED_EVENT",
    "connected": "CONNECTED_EVENT",
    "referenced": "REFERENCED_EVENT",
    "closed": "CLOSED_EVENT",
}
_CLOSING = ("close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved")


_VALIDATED: dict[str, DocumentNode | list[GraphQLError]] = {}  # query text -> document


def execute(fake: FakeGitHub, query: str, variables: JSON | None) -> JSON:
    """The response body GitHub would send for ``query`` (always HTTP 200). A document is
    parsed and validated against the schema once per query text."""
    document = _VALIDATED.get(query)
    if document is None:
        try:
            parsed = parse(query)
        except GraphQLError as error:
            document = [error]
        else:
            document = validate(SCHEMA, parsed) or parsed
        _VALIDATED[query] = document
    if isinstance(document, list):
        return {"data": None, "errors": [_error(e) for e in document]}
    result = execute_sync(
        SCHEMA, document, root_value=_Root(fake).value(), variable_values=variables
    )
    body: JSON = {"data": result.data}
    if result.errors:
        body["errors"] = [_error(e) for e in result.errors]
    return body


def _error(error: GraphQLError) -> JSON:
    return {"message": error.message, "locations": [loc._asdict() for loc in error.locations or ()]}


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _index(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    return int(base64.b64decode(cursor).decode().rsplit(":", 1)[1])


def connection(items: Sequence[Any], args: dict[str, Any]) -> JSON:
    """A connection page: ``first``/``after`` from the start, ``last``/``before`` from the
    end, as GraphQL's cursor connections specify."""
    start, end = 0, len(items)
    after, before = _index(args.get("after")), _index(args.get("before"))
    if after is not None:
        start = after + 1
    if before is not None:
        end = min(end, before)
    if args.get("first") is not None:
        end = min(end, start + int(args["first"]))
    if args.get("last") is not None:
        start = max(start, end - int(args["last"]))
    return {
        "nodes": list(items[start:end]),
        "totalCount": len(items),
        "filteredCount": len(items),
        "pageInfo": {
            "hasPreviousPage": start > 0,
            "hasNextPage": end < len(items),
            "startCursor": _cursor(start) if end > start else None,
            "endCursor": _cursor(end - 1) if end > start else None,
        },
    }


class _Root:
    """Resolvers as plain dicts: a callable value is called with the field's arguments."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self._connected: dict[tuple[str, int], set[int]] | None = None

    def value(self) -> JSON:
        return {
            "repository": self._repository_field,
            "node": lambda _info, id: self.node(id),
            "nodes": lambda _info, ids: [self.node(i) for i in ids],
        }

    def node(self, wanted: str) -> JSON | None:
        """``Query.node``: an issue by its node id (the only node type served)."""
        for repo in self.fake.repos.values():
            for issue in repo.issues.values():
                if issue.pull is None and issue.visible and node_id("I", issue.id) == wanted:
                    return self.issue(issue)
        return None

    def _repository_field(self, _info: Any, owner: str, name: str, **_: Any) -> JSON | None:
        full = f"{owner}/{name}"
        match = next((r for r in self.fake.repos if r.lower() == full.lower()), None)
        return None if match is None else self.repository(match)

    def repository(self, full_name: str) -> JSON:
        fake = self.fake
        owner = full_name.split("/", 1)[0]

        def issue(_info: Any, number: int) -> JSON | None:
            found = fake.repos[full_name].issues.get(number)
            if found is None or found.pull is not None or not found.visible:
                return None
            return self.issue(found)

        def pull(_info: Any, number: int) -> JSON | None:
            found = fake.repos[full_name].issues.get(number)
            return None if found is None or found.pull is None else self.pull(found)

        def issues(_info: Any, **args: Any) -> JSON:
            return self.issues(full_name, args)

        return {
            "name": full_name.split("/", 1)[1],
            "nameWithOwner": full_name,
            "url": f"{fake.html_url}/{full_name}",
            "owner": self.owner(owner),
            "issue": issue,
            "pullRequest": pull,
            "issues": issues,
        }

    def issues(self, full_name: str, args: dict[str, Any]) -> JSON:
        """``Repository.issues``: issues (never pull requests) of ``states``, ordered by
        ``orderBy`` (GitHub's default: creation, ascending). A cursor names its issue, as
        GitHub's name their node: closing an issue shifts no later one."""
        states = {s.lower() for s in args.get("states") or ("OPEN", "CLOSED")}
        order = args.get("orderBy") or {"field": "CREATED_AT", "direction": "ASC"}
        field = {"CREATED_AT": "created_at", "UPDATED_AT": "updated_at"}.get(order["field"])

        def key(issue: Issue) -> tuple[int, int]:
            value = len(issue.comments) if field is None else getattr(issue, field)
            return (value, issue.number)

        every = [i for i in self.fake.repos[full_name].issues.values() if i.pull is None]
        ordered = sorted((i for i in every if i.visible), key=key)
        if order["direction"] == "DESC":
            ordered.reverse()
        after = args.get("after")
        if after is not None:
            named = self.fake.repos[full_name].issues.get(_index(after) or 0)
            if named is None:
                raise GraphQLError(f"`{after}` does not appear to be a valid cursor.")
            mark = key(named)
            descending = order["direction"] == "DESC"
            ordered = [i for i in ordered if (key(i) < mark if descending else key(i) > mark)]
        listed = [i for i in ordered if i.state in states]
        page = connection([self.issue(i) for i in listed], {"first": args.get("first")})
        if page["nodes"]:
            page["pageInfo"]["startCursor"] = _cursor(page["nodes"][0]["number"])
            page["pageInfo"]["endCursor"] = _cursor(page["nodes"][-1]["number"])
        return page

    def owner(self, login: str) -> JSON:
        return {"__typename": "User", "login": login}

    def subject(self, repo: str, number: int) -> JSON:
        target = self.fake.repos[repo].issues[number]
        return self.pull(target) if target.pull is not None else self.issue(target)

    def issue(self, issue: Issue) -> JSON:
        def timeline(_info: Any, **args: Any) -> JSON:
            wanted = set(args.get("itemTypes") or _ITEM_TYPES.values())
            events = sorted(issue.timeline, key=lambda e: e.created_at)
            items = [
                self.event(issue, e)
                for e in events
                if _ITEM_TYPES.get(e.kind) in wanted and self._renderable(e)
            ]
            return connection(items, args)

        def project_items(_info: Any, **args: Any) -> JSON:
            # One card on one board, with its single-select "Status" (``move_card``).
            status = issue.project_status
            value = {"__typename": "ProjectV2ItemFieldSingleSelectValue", "name": status}
            cards = [] if status is None else [{"fieldValueByName": lambda _i, name: value}]
            return connection(cards, args)

        return {
            "__typename": "Issue",
            "id": node_id("I", issue.id),
            "projectItems": project_items,
            "number": issue.number,
            "title": issue.title,
            "url": f"{self.fake.html_url}/{issue.repo}/issues/{issue.number}",
            "updatedAt": iso(issue.updated_at),
            "repository": lambda _info: self.repository(issue.repo),
            "timelineItems": timeline,
        }

    def pull(self, pr: Issue) -> JSON:
        assert pr.pull is not None
        part = pr.pull
        head_repo = part.head_repo or pr.repo

        def closing(_info: Any, **args: Any) -> JSON:
            return connection([self.issue(i) for i in self.closing_issues(pr)], args)

        def comments(_info: Any, **args: Any) -> JSON:
            found = [{"body": c.body, "createdAt": iso(c.created_at)} for c in pr.comments]
            return connection(found, args)

        return {
            "__typename": "PullRequest",
            "number": pr.number,
            "title": pr.title,
            "body": pr.body or "",
            "url": f"{self.fake.html_url}/{pr.repo}/pull/{pr.number}",
            "createdAt": iso(pr.created_at),
            "updatedAt": iso(pr.updated_at),
            "headRefName": part.head_ref,
            "headRepository": (
                (lambda _info: self.repository(head_repo)) if head_repo in self.fake.repos else None
            ),
            "headRepositoryOwner": self.owner(head_repo.split("/", 1)[0]),
            "isCrossRepository": part.head_repo is not None and part.head_repo != pr.repo,
            "repository": lambda _info: self.repository(pr.repo),
            "mergeCommit": self._sha(pr.repo, part.merge_commit_sha),
            "closingIssuesReferences": closing,
            "comments": comments,
        }

    def closing_issues(self, pr: Issue) -> list[Issue]:
        """Issues of the pull request's repository that its body closes ("Fixes #N") or
        that are linked to it by hand (a Development link)."""
        words = (pr.body or "").lower().replace(",", " ").split()
        numbers = {
            int(word[1:])
            for before, word in itertools.pairwise(words)
            if before in _CLOSING and word.startswith("#") and word[1:].isdigit()
        }
        numbers |= self.connected().get((pr.repo, pr.number), set())
        issues = self.fake.repos[pr.repo].issues
        found = [issues[n] for n in sorted(numbers) if n in issues]
        return [i for i in found if i.pull is None and i.visible]

    def connected(self) -> dict[tuple[str, int], set[int]]:
        """Pull request -> the issues of its repository linked to it by hand (built once
        per request)."""
        if self._connected is None:
            self._connected = {}
            for repo in self.fake.repos.values():
                for issue in repo.issues.values():
                    for event in issue.timeline:
                        source = event.source
                        if event.kind == "connected" and source and source[0] == issue.repo:
                            self._connected.setdefault(source, set()).add(issue.number)
        return self._connected

    def _renderable(self, event: Event) -> bool:
        if event.kind in ("cross-referenced", "connected"):
            return event.source is not None and event.source[0] in self.fake.repos
        return True

    def event(self, issue: Issue, event: Event) -> JSON:
        at = iso(event.created_at)
        if event.kind == "cross-referenced" and event.source is not None:
            src_repo, src_number = event.source
            return {
                "__typename": "CrossReferencedEvent",
                "createdAt": at,
                "referencedAt": at,
                "isCrossRepository": src_repo != issue.repo,
                "willCloseTarget": False,
                "source": lambda _info: self.subject(src_repo, src_number),
                "target": lambda _info: self.issue(issue),
                "url": f"{self.fake.html_url}/{issue.repo}/issues/{issue.number}#ref-{event.id}",
            }
        if event.kind == "connected" and event.source is not None:
            src_repo, src_number = event.source
            return {
                "__typename": "ConnectedEvent",
                "createdAt": at,
                "isCrossRepository": src_repo != issue.repo,
                "source": lambda _info: self.subject(src_repo, src_number),
                "subject": lambda _info: self.issue(issue),
            }
        commit = self._commit(issue, event)
        if event.kind == "referenced":
            commit_repo = event.commit_repo or issue.repo
            return {
                "__typename": "ReferencedEvent",
                "createdAt": at,
                "commit": commit,
                "commitRepository": lambda _info: self.repository(commit_repo),
                "isCrossRepository": commit_repo != issue.repo,
                "isDirectReference": True,
                "subject": lambda _info: self.issue(issue),
            }
        closer: Callable[[Any], JSON | None] | JSON | None = commit
        if event.closer is not None:
            repo, number = event.closer
            closer = lambda _info: self.subject(repo, number)  # noqa: E731
        reason = event.extra.get("state_reason")
        return {
            "__typename": "ClosedEvent",
            "createdAt": at,
            "closer": closer,
            "stateReason": reason.upper() if isinstance(reason, str) else None,
            "url": f"{self.fake.html_url}/{issue.repo}/issues/{issue.number}#event-{event.id}",
        }

    def _commit(self, issue: Issue, event: Event) -> JSON | None:
        return self._sha(event.commit_repo or issue.repo, event.commit_id)

    def _sha(self, repo: str, sha: str | None) -> JSON | None:
        if sha is None:
            return None
        return {
            "__typename": "Commit",
            "oid": sha,
            "url": f"{self.fake.html_url}/{repo}/commit/{sha}",
            "repository": lambda _info: self.repository(repo),
        }
