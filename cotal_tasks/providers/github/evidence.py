"""What GitHub links to an issue, read in batches over GraphQL. Pure: builds the query and
reads the answer; no I/O.

One request reads, for up to ``BATCH`` issues and pull requests at once (aliases on one
``repository``): each issue's newest timeline links (cross-references, Development
links, commit references, closings) and each changed pull request's closing references
and latest comments (the issues it names that no issue change shows). Each link is
attributed to the repository it lives in: a pull request of another repository keeps
its own URL, a fork's head branch is ``owner/fork:branch``, another repository's commit
``owner/repo@sha``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.core import MAX_EVIDENCE
from cotal_tasks.providers.hosted.mentions import mentioned_numbers
from cotal_tasks.providers.hosted.tracker import Evidence, epoch_ms

BATCH = 100  # aliases per request: GitHub's documented page maximum
COMMENTS = 30  # the latest comments of a changed pull request read for mentions
ITEM_TYPES = "[CROSS_REFERENCED_EVENT, CONNECTED_EVENT, REFERENCED_EVENT, CLOSED_EVENT]"

_FRAGMENTS = """
fragment Pull on PullRequest {
  number url headRefName
  headRepository { nameWithOwner }
  headRepositoryOwner { login }
  repository { nameWithOwner }
}
fragment Links on IssueTimelineItemsConnection {
  pageInfo { hasPreviousPage startCursor }
  nodes {
    __typename
    ... on CrossReferencedEvent { createdAt source { __typename ...Pull } }
    ... on ConnectedEvent {
      createdAt source { __typename ...Pull } subject { __typename ...Pull }
    }
    ... on ReferencedEvent {
      createdAt commit { oid } commitRepository { nameWithOwner }
    }
    ... on ClosedEvent {
      createdAt
      closer {
        __typename
        ... on Commit { oid repository { nameWithOwner } }
        ... on PullRequest { ...Pull mergeCommit { oid } }
      }
    }
  }
}
"""


@dataclass(frozen=True, slots=True)
class Ask:
    """One alias of a batch: an issue's timeline (from ``before``, or the newest), or a
    pull request's references."""

    number: int
    pull: bool = False
    before: str | None = None


@dataclass
class Found:
    """What a batch read: evidence per issue, where an issue's timeline goes on, and the
    issues of this repository that changed pull requests name."""

    evidence: dict[int, list[Evidence]] = field(default_factory=dict)
    older: dict[int, str] = field(default_factory=dict)  # number -> cursor of older items
    linked: dict[int, set[int]] = field(default_factory=dict)  # pull request -> issues


def query(asks: Sequence[Ask]) -> tuple[str, dict[str, Any]]:
    """The GraphQL document for one batch and its variables (besides owner and name).
    Numbers and cursors travel as variables, so batches of one shape share a document."""
    parts: list[str] = []
    params: list[str] = []
    variables: dict[str, Any] = {}
    for index, ask in enumerate(asks):
        variables[f"n{index}"] = ask.number
        params.append(f"$n{index}: Int!")
        if ask.pull:
            parts.append(
                f"a{index}: pullRequest(number: $n{index}) {{ number body "
                f"closingIssuesReferences(first: {BATCH}) "
                "{ nodes { number repository { nameWithOwner } } } "
                f"comments(last: {COMMENTS}) {{ nodes {{ body }} }} }}"
            )
            continue
        before = ""
        if ask.before is not None:
            variables[f"b{index}"] = ask.before
            params.append(f"$b{index}: String")
            before = f", before: $b{index}"
        parts.append(
            f"a{index}: issue(number: $n{index}) {{ number "
            f"timelineItems(last: {MAX_EVIDENCE}, itemTypes: {ITEM_TYPES}{before}) "
            "{ ...Links } }"
        )
    body = "\n    ".join(parts)
    fragments = _FRAGMENTS if any(not ask.pull for ask in asks) else ""  # unused ones fail
    document = (
        f"query($owner: String!, $name: String!, {', '.join(params)}) {{\n"
        f"  repository(owner: $owner, name: $name) {{\n    {body}\n  }}\n}}\n{fragments}"
    )
    return document, variables


def read(repository: str, asks: Sequence[Ask], data: Mapping[str, Any], found: Found) -> None:
    """Add what one answer says to ``found``."""
    repo = (data or {}).get("repository") or {}
    for index, ask in enumerate(asks):
        node = repo.get(f"a{index}")
        if not isinstance(node, Mapping):
            continue  # gone, transferred, or not an issue: nothing to read
        if ask.pull:
            found.linked[ask.number] = pull_links(repository, ask.number, node)
            continue
        items = node.get("timelineItems") or {}
        evidence = found.evidence.setdefault(ask.number, [])
        evidence.extend(timeline_evidence(repository, items.get("nodes") or ()))
        page = items.get("pageInfo") or {}
        enough = len({(e.kind, e.ref) for e in evidence}) >= MAX_EVIDENCE
        if page.get("hasPreviousPage") and page.get("startCursor") and not enough:
            found.older[ask.number] = str(page["startCursor"])


def pull_links(repository: str, number: int, pull: Mapping[str, Any]) -> set[int]:
    """Issues of ``repository`` a pull request names: its closing references (the body's
    closing keywords and Development links) and mentions in its latest comments."""
    linked: set[int] = set()
    for issue in (pull.get("closingIssuesReferences") or {}).get("nodes") or ():
        owner = ((issue or {}).get("repository") or {}).get("nameWithOwner")
        if issue and issue.get("number") and str(owner).lower() == repository.lower():
            linked.add(int(issue["number"]))
    comments = (pull.get("comments") or {}).get("nodes") or ()
    texts = [str(pull.get("body") or ""), *(str((c or {}).get("body") or "") for c in comments)]
    for text in texts:
        linked |= mentioned_numbers(text, repository, exclude=number)
    return linked


def timeline_evidence(repository: str, nodes: Iterable[Any]) -> list[Evidence]:
    found: list[Evidence] = []
    for node in nodes:
        if not isinstance(node, Mapping):
            continue
        at = epoch_ms(node.get("createdAt"))
        kind = node.get("__typename")
        if kind == "CrossReferencedEvent":
            found += pull_evidence(repository, node.get("source"), at)
        elif kind == "ConnectedEvent":
            for side in (node.get("source"), node.get("subject")):
                found += pull_evidence(repository, side, at)
        elif kind == "ReferencedEvent":
            commit = node.get("commit") or {}
            where = (node.get("commitRepository") or {}).get("nameWithOwner")
            found += commit_evidence(repository, commit.get("oid"), where, at)
        elif kind == "ClosedEvent":
            closer = node.get("closer") or {}
            if closer.get("__typename") == "Commit":
                where = (closer.get("repository") or {}).get("nameWithOwner")
                found += commit_evidence(repository, closer.get("oid"), where, at)
            else:  # a merged pull request: its merge commit closed the issue
                found += pull_evidence(repository, closer, at)
                where = (closer.get("repository") or {}).get("nameWithOwner")
                merged = (closer.get("mergeCommit") or {}).get("oid")
                found += commit_evidence(repository, merged, where, at)
    return found


def pull_evidence(repository: str, pull: Any, at: int) -> list[Evidence]:
    """A pull request as a ``review`` (its own URL) and its head as a ``branch``: a plain
    branch name when the head is this repository's, else ``owner/fork:branch``."""
    if not isinstance(pull, Mapping) or pull.get("__typename") != "PullRequest":
        return []
    found: list[Evidence] = []
    if pull.get("url"):
        found.append(Evidence("review", str(pull["url"]), at))
    branch = pull.get("headRefName")
    if branch:
        head = (pull.get("headRepository") or {}).get("nameWithOwner")
        if head is None:  # the fork is gone: its owner is all that is known
            owner = (pull.get("headRepositoryOwner") or {}).get("login")
            head = f"{owner}" if owner else "(deleted fork)"
        own = str(head).lower() == repository.lower()
        found.append(Evidence("branch", str(branch) if own else f"{head}:{branch}", at))
    return found


def commit_evidence(repository: str, sha: Any, where: Any, at: int) -> list[Evidence]:
    if not sha:
        return []
    own = where is None or str(where).lower() == repository.lower()
    return [Evidence("commit", str(sha) if own else f"{where}@{sha}", at)]
