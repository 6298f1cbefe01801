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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.core import MAX_EVIDENCE
from cotal_tasks.providers.hosted.boundary import Reason, as_list, at_path
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


def _when(stamp: Any) -> int:
    try:
        return epoch_ms(stamp) if isinstance(stamp, str) else 0
    except ValueError:
        return 0


Refused = Callable[[Reason, str, str], None]  # what the boundary records (``note``)


def read(
    repository: str,
    asks: Sequence[Ask],
    data: Any,
    found: Found,
    refused: Refused | None = None,
) -> None:
    """Add what one answer says to ``found``. An alias or timeline node of another shape
    is handed to ``refused`` (the boundary counts it) and left out; the rest is read."""
    for index, ask in enumerate(asks):
        node = at_path(data, "repository", f"a{index}")
        if node is None:
            continue  # gone, transferred, or not an issue: nothing to read
        if not isinstance(node, Mapping):
            if refused is not None:
                refused("evidence-refused", f"links of {ask.number}", type(node).__name__)
            continue
        if ask.pull:
            found.linked[ask.number] = pull_links(repository, ask.number, node)
            continue
        evidence = found.evidence.setdefault(ask.number, [])
        nodes = as_list(at_path(node, "timelineItems", "nodes"))
        odd = [n for n in nodes if not isinstance(n, Mapping)]
        if odd and refused is not None:
            refused("evidence-refused", f"timeline of {ask.number}", f"{len(odd)} odd nodes")
        evidence.extend(timeline_evidence(repository, nodes))
        page = at_path(node, "timelineItems", "pageInfo")
        cursor = at_path(page, "startCursor")
        enough = len({(e.kind, e.ref) for e in evidence}) >= MAX_EVIDENCE
        if at_path(page, "hasPreviousPage") is True and isinstance(cursor, str) and not enough:
            found.older[ask.number] = cursor


def pull_links(repository: str, number: int, pull: Mapping[str, Any]) -> set[int]:
    """Issues of ``repository`` a pull request names: its closing references (the body's
    closing keywords and Development links) and mentions in its latest comments."""
    linked: set[int] = set()
    for issue in as_list(at_path(pull, "closingIssuesReferences", "nodes")):
        owner = at_path(issue, "repository", "nameWithOwner")
        found = at_path(issue, "number")
        if isinstance(found, int) and str(owner).lower() == repository.lower():
            linked.add(found)
    comments = as_list(at_path(pull, "comments", "nodes"))
    texts = [at_path(pull, "body"), *(at_path(c, "body") for c in comments)]
    for text in texts:
        if isinstance(text, str):
            linked |= mentioned_numbers(text, repository, exclude=number)
    return linked


def timeline_evidence(repository: str, nodes: Iterable[Any]) -> list[Evidence]:
    found: list[Evidence] = []
    for node in nodes:
        at = _when(at_path(node, "createdAt"))
        kind = at_path(node, "__typename")
        if kind == "CrossReferencedEvent":
            found += pull_evidence(repository, at_path(node, "source"), at)
        elif kind == "ConnectedEvent":
            for side in (at_path(node, "source"), at_path(node, "subject")):
                found += pull_evidence(repository, side, at)
        elif kind == "ReferencedEvent":
            where = at_path(node, "commitRepository", "nameWithOwner")
            found += commit_evidence(repository, at_path(node, "commit", "oid"), where, at)
        elif kind == "ClosedEvent":
            closer = at_path(node, "closer")
            if at_path(closer, "__typename") == "Commit":
                where = at_path(closer, "repository", "nameWithOwner")
                found += commit_evidence(repository, at_path(closer, "oid"), where, at)
            else:  # a merged pull request: its merge commit closed the issue
                found += pull_evidence(repository, closer, at)
                where = at_path(closer, "repository", "nameWithOwner")
                found += commit_evidence(
                    repository, at_path(closer, "mergeCommit", "oid"), where, at
                )
    return found


def pull_evidence(repository: str, pull: Any, at: int) -> list[Evidence]:
    """A pull request as a ``review`` (its own URL) and its head as a ``branch``: a plain
    branch name when the head is this repository's, else ``owner/fork:branch``."""
    if at_path(pull, "__typename") != "PullRequest":
        return []
    found: list[Evidence] = []
    url = at_path(pull, "url")
    if isinstance(url, str) and url:
        found.append(Evidence("review", url, at))
    branch = at_path(pull, "headRefName")
    if isinstance(branch, str) and branch:
        head = at_path(pull, "headRepository", "nameWithOwner")
        if not isinstance(head, str):  # the fork is gone: its owner is all that is known
            owner = at_path(pull, "headRepositoryOwner", "login")
            head = str(owner) if isinstance(owner, str) else "(deleted fork)"
        own = head.lower() == repository.lower()
        found.append(Evidence("branch", branch if own else f"{head}:{branch}", at))
    return found


def commit_evidence(repository: str, sha: Any, where: Any, at: int) -> list[Evidence]:
    if not isinstance(sha, str) or not sha:
        return []
    own = not isinstance(where, str) or where.lower() == repository.lower()
    return [Evidence("commit", sha if own else f"{where}@{sha}", at)]
