"""GitHub evidence: everything the tracker links to an issue, attributed to the repository
it lives in, read over GraphQL in batches (no webhook involved).

The fake serves GraphQL from the same state as its REST timeline: cross-references
(from pull requests of this or another repository), Development links (``connected``,
which REST shows without the pull request), commit references, and closings.
"""

from __future__ import annotations

import logging
import math

import pytest

from cotal_tasks.providers.github import evidence
from tests.providers.github._support import REPO, GitHubEndpoint, evidence_requests

OTHER = "octo-org/elsewhere"
FORK = "contributor/hello-world"


async def refs(gh: GitHubEndpoint, number: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gh.get(number))["evidence"]}


def graphql_requests(gh: GitHubEndpoint, since: int = 0) -> int:
    return sum(1 for r in gh.fake.requests[since:] if r.matches("POST", "/graphql"))


# -- finding 2: attribution ----------------------------------------------------------------


async def test_a_pull_request_of_another_repository_keeps_its_own_url_and_branch(
    gh: GitHubEndpoint,
) -> None:
    """``OTHER`` pull request #2 cross-references our #1; our own #2 is an unrelated pull
    request. The evidence names ``OTHER``'s pull request, never our #2 or its branch."""
    fake = gh.fake
    fake.add_issue(REPO, "Crash in the parser")  # 1
    fake.add_pull(REPO, "Unrelated", "Nothing to see", head_ref="unrelated-work")  # 2
    fake.add_issue(OTHER, "Upstream tracking issue")  # elsewhere#1
    fake.advance(60)
    upstream = fake.add_pull(
        OTHER, "Fix the parser upstream", "See below", head_ref="fix-parser", references=[(REPO, 1)]
    )  # elsewhere#2
    assert upstream["number"] == 2

    await gh.poll()

    assert await refs(gh, 1) == {
        ("review", f"https://github.com/{OTHER}/pull/2"),
        ("branch", f"{OTHER}:fix-parser"),
    }
    assert fake.calls("GET", f"/repos/{REPO}/pulls/*") == []


async def test_a_fork_pull_request_branch_is_the_forks(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.add_issue(REPO, "Typo in the docs")  # 1
    fake.advance(60)
    pr = fake.add_pull(REPO, "Fix the typo", head_ref="patch-1", head_repo=FORK, closes=[1])

    await gh.poll()

    assert await refs(gh, 1) == {("review", str(pr["html_url"])), ("branch", f"{FORK}:patch-1")}


async def test_a_commit_of_another_repository_names_it(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.add_issue(REPO, "Vendored library bug")  # 1
    fake.add_repo(OTHER)
    fake.advance(60)
    fake.add_commit_reference(REPO, 1, "a" * 40, commit_repo=OTHER)
    fake.add_commit_reference(REPO, 1, "b" * 40)

    await gh.poll()

    assert await refs(gh, 1) == {("commit", f"{OTHER}@{'a' * 40}"), ("commit", "b" * 40)}


# -- finding 3: completeness -----------------------------------------------------------------


def plant_links(gh: GitHubEndpoint, count: int) -> dict[int, set[tuple[str, str]]]:
    """Links no pull request text of this repository names, on every other issue of
    ``count``: a commit reference, a pull request of another repository, a Development
    link, or a closing commit. Returns what each issue's evidence must hold."""
    fake = gh.fake
    fake.bulk_issues(REPO, count)
    fake.add_issue(OTHER, "Upstream")  # elsewhere#1
    expected: dict[int, set[tuple[str, str]]] = {}
    for number in range(1, count + 1, 2):
        kind = (number // 2) % 4
        if kind == 0:
            sha = f"{number:040x}"
            fake.add_commit_reference(REPO, number, sha)
            expected[number] = {("commit", sha)}
        elif kind == 1:
            pr = fake.add_pull(
                OTHER,
                f"Upstream {number}",
                "x",
                head_ref=f"up-{number}",
                references=[(REPO, number)],
            )
            expected[number] = {("review", str(pr["html_url"])), ("branch", f"{OTHER}:up-{number}")}
        elif kind == 2:
            pr = fake.add_pull(REPO, f"Work {number}", "No issue named", head_ref=f"w-{number}")
            fake.connect(REPO, number, int(pr["number"]))
            expected[number] = {("review", str(pr["html_url"])), ("branch", f"w-{number}")}
        else:
            sha = f"{number:040x}"
            fake.close_issue(REPO, number, commit_id=sha)
            expected[number] = {("commit", sha)}
    return expected


async def test_links_no_pull_request_text_names_become_evidence_at_import(
    gh: GitHubEndpoint,
) -> None:
    """Before: the import read no timeline at all, so none of these links was evidence."""
    expected = plant_links(gh, 300)

    await gh.poll()

    for number, wanted in expected.items():
        assert await refs(gh, number) == wanted, number
    assert evidence_requests(gh.fake) == []  # no issue or timeline read one by one
    listed = len(gh.fake.repos[REPO].issues)
    assert graphql_requests(gh) <= math.ceil(listed / 99) + 1  # a batch per list page


async def test_an_issue_address_in_a_pull_request_links_it(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 5)
    await gh.poll()
    fake.advance(60)
    body = f"Follows up https://github.com/{REPO}/issues/2 (and not other/repo#3)"
    pr = fake.add_pull(REPO, "Follow-up", body, head_ref="follow-up", references=[(REPO, 2)])
    mark = len(fake.requests)

    await gh.poll()

    assert await refs(gh, 2) == {("review", str(pr["html_url"])), ("branch", "follow-up")}
    assert await refs(gh, 3) == set()
    # Issue 2 is on the page the poll's probe brought (the import's only page, as it is
    # now): its evidence is read in that page's batch, with no read of its own.
    assert evidence_requests(fake, mark) == []


async def test_a_development_link_made_later_is_found_in_one_poll(gh: GitHubEndpoint) -> None:
    """Linking an existing pull request by hand leaves the issue's ``updated_at`` alone;
    the pull request changed, and its closing references name the issue."""
    fake = gh.fake
    fake.bulk_issues(REPO, 5)
    pr = fake.add_pull(REPO, "Refactor", "No issue named", head_ref="refactor")
    await gh.poll()
    fake.advance(60)
    fake.connect(REPO, 3, int(pr["number"]))
    fake.touch(REPO, int(pr["number"]))

    await gh.poll()

    assert await refs(gh, 3) == {("review", str(pr["html_url"])), ("branch", "refactor")}


async def test_a_mention_in_a_pull_request_comment_is_found_in_one_poll(
    gh: GitHubEndpoint,
) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 5)
    pr = fake.add_pull(REPO, "Refactor", "No issue named", head_ref="refactor")
    await gh.poll()
    fake.advance(60)
    fake.add_comment(REPO, int(pr["number"]), "This also fixes #4, I think")
    fake.cross_reference(REPO, 4, (REPO, int(pr["number"])))

    await gh.poll()

    assert await refs(gh, 4) == {("review", str(pr["html_url"])), ("branch", "refactor")}


async def test_older_timeline_pages_are_read_until_the_record_is_full(gh: GitHubEndpoint) -> None:
    """The newest 32 timeline items are one commit referenced again and again: the read
    goes back a page for the pull request before them."""
    fake = gh.fake
    fake.add_issue(REPO, "Noisy")  # 1
    fake.advance(1)
    pr = fake.add_pull(REPO, "Early fix", head_ref="early", closes=[1])
    for _ in range(40):
        fake.advance(1)
        fake.add_commit_reference(REPO, 1, "c" * 40)

    await gh.poll()

    assert await refs(gh, 1) == {
        ("review", str(pr["html_url"])),
        ("branch", "early"),
        ("commit", "c" * 40),
    }
    assert graphql_requests(gh) == 2


async def test_a_server_that_refuses_the_evidence_query_still_syncs(
    gh: GitHubEndpoint, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An older GitHub Enterprise Server without one of the timeline item types answers
    the query with errors and no data: the issues are mirrored without those links, and
    the log says so."""
    monkeypatch.setattr(evidence, "ITEM_TYPES", "[CROSS_REFERENCED_EVENT, NOT_A_TYPE]")
    fake = gh.fake
    fake.bulk_issues(REPO, 5)
    caplog.set_level(logging.WARNING)

    report = await gh.poll()

    assert report.issues == 5
    assert await refs(gh, 1) == set()
    assert "evidence not readable" in caplog.text
    assert await gh.store.freshness() is None


async def test_an_issue_read_again_for_its_evidence_shows_no_write_mark(
    gh: GitHubEndpoint,
) -> None:
    """The bridge's hidden write mark stays out of the record on every read: the walk's
    first listing and the read that a pull request naming the issue brings."""
    fake = gh.fake
    mark = "<!-- cotal-tasks:write 0123456789abcdef -->"
    fake.add_issue(REPO, "Made through the bridge", f"The brief\n\n{mark}")  # 1
    await gh.poll()
    assert (await gh.get(1))["brief"] == "The brief"
    fake.advance(60)
    fake.add_pull(REPO, "Fix it", "Fixes #1", head_ref="fix-1", closes=[1])

    await gh.poll()

    record = await gh.get(1)
    assert ("branch", "fix-1") in {(e["kind"], e["ref"]) for e in record["evidence"]}
    assert record["brief"] == "The brief"
