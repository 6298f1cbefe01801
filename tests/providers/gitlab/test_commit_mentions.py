"""Commits that mention an issue without a merge request: GitLab records them only as
system notes on the issue ("mentioned in commit <sha>"). The notes of every changed issue
are read (all pages) and each such note becomes ``commit`` evidence attributed to the
project the commit lives in; the cost grows with the changed issues, never the project.

The note shapes are GitLab's documented example (``doc-issue-notes.json``), with the body
GitLab writes for a cross-reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cotal_tasks.providers.gitlab.mapping import names_merge_request, note_evidence
from cotal_tasks.providers.hosted.tracker import Evidence, epoch_ms
from tests.providers.gitlab._support import (
    ISSUES,
    PROJECT,
    GitLabEndpoint,
    evidence_requests,
    issue_pages,
    merge_request_pages,
)

FIXTURE = Path(__file__).parents[2] / "fixtures" / "gitlab" / "doc-issue-notes.json"
SHA = "54f7727c2f3fe5c9b3c1e0cbd6b8d6aa1b3f0e21"


def documented_notes() -> list[dict[str, Any]]:
    notes = json.loads(FIXTURE.read_text())
    assert isinstance(notes, list)
    return notes


def mention(body: str) -> dict[str, Any]:
    """The documented system note with the body of a cross-reference."""
    return {**documented_notes()[0], "body": body}


async def refs(gl: GitLabEndpoint, iid: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gl.get(iid))["evidence"]}


# -- the note shapes -----------------------------------------------------------------------


def test_the_documented_notes_carry_no_link() -> None:
    """A state change ("closed") and a comment say nothing of commits."""
    assert [note_evidence(n, "group/project") for n in documented_notes()] == [[], []]


def test_a_commit_mention_is_attributed_to_its_project() -> None:
    at = epoch_ms(documented_notes()[0]["created_at"])
    own = "group/project"
    assert note_evidence(mention(f"mentioned in commit {SHA}"), own) == [
        Evidence("commit", SHA, at)
    ]
    # Of a project in the same namespace, GitLab writes the bare project name.
    assert note_evidence(mention(f"mentioned in commit other@{SHA}"), own) == [
        Evidence("commit", f"group/other@{SHA}", at)
    ]
    assert note_evidence(mention(f"mentioned in commit elsewhere/lib@{SHA}"), own) == [
        Evidence("commit", f"elsewhere/lib@{SHA}", at)
    ]
    assert note_evidence(mention(f"mentioned in commit group/project@{SHA}"), own) == [
        Evidence("commit", SHA, at)
    ]


def test_only_a_system_note_of_that_shape_links_a_commit() -> None:
    own = "group/project"
    comment = {**mention(f"mentioned in commit {SHA}"), "system": False}
    assert note_evidence(comment, own) == []  # anyone can write that in a comment
    assert note_evidence(mention(f"mentioned in commit {SHA} and more"), own) == []
    assert note_evidence(mention("mentioned in commit not-a-sha"), own) == []
    assert note_evidence({**mention(f"mentioned in commit {SHA}"), "body": 7}, own) == []
    assert names_merge_request(mention("mentioned in merge request !2"))
    assert names_merge_request(mention("mentioned in merge request other/lib!12"))
    assert not names_merge_request(mention(f"mentioned in commit {SHA}"))


# -- over the fake GitLab --------------------------------------------------------------------


async def test_commits_that_mention_an_issue_become_evidence(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.add_project("acme/other")
    fake.add_project("elsewhere/lib")
    fake.bulk_issues(PROJECT, 3)
    await gl.poll()
    fake.advance(60)
    fake.mention_in_commit(PROJECT, 2, SHA)
    fake.advance(1)
    fake.mention_in_commit(PROJECT, 2, "a" * 40, from_project="acme/other")
    fake.advance(1)
    fake.mention_in_commit(PROJECT, 3, "b" * 40, from_project="elsewhere/lib")

    await gl.poll()

    assert await refs(gl, 2) == {("commit", SHA), ("commit", f"acme/other@{'a' * 40}")}
    assert await refs(gl, 3) == {("commit", f"elsewhere/lib@{'b' * 40}")}
    assert await refs(gl, 1) == set()


async def test_the_cost_grows_with_the_changed_issues_not_the_project(
    gl: GitLabEndpoint,
) -> None:
    """300 issues, one mentioned by a commit: the poll costs its two listings and that
    issue's notes (it has no merge request, so nothing more); an unchanged poll, one (the
    merge requests wait for their cadence: ``merge_requests_interval_s``)."""
    fake = gl.fake
    fake.bulk_issues(PROJECT, 300)
    await gl.poll()
    await gl.poll()  # past the overlap
    fake.advance(60)
    fake.mention_in_commit(PROJECT, 150, SHA)
    mark = len(fake.requests)

    await gl.poll()

    assert [r.path for r in evidence_requests(fake, mark)] == [f"{ISSUES}/150/notes"]
    notes = evidence_requests(fake, mark)[0]
    assert (notes.query["sort"], notes.query["per_page"]) == ("asc", "100")
    assert len(fake.requests) - mark == 3
    assert ("commit", SHA) in await refs(gl, 150)

    fake.advance(60)
    mark = len(fake.requests)
    await gl.poll()
    assert (len(issue_pages(fake, mark)), len(merge_request_pages(fake, mark))) == (1, 0)
    assert len(fake.requests) - mark == 1


async def test_every_page_of_notes_is_read(gl: GitLabEndpoint) -> None:
    """A busy issue: 150 comments, then the commit; the mention is on the second page."""
    fake = gl.fake
    fake.add_issue(PROJECT, "A busy issue")  # 1
    await gl.poll()
    for k in range(150):
        fake.advance(1)
        fake.add_note(PROJECT, 1, f"Comment {k}")
    fake.advance(1)
    fake.mention_in_commit(PROJECT, 1, SHA)
    mark = len(fake.requests)

    await gl.poll()

    pages = [r.query.get("page") for r in evidence_requests(fake, mark)]
    assert pages == [None, "2"]  # the notes, both pages, and nothing else
    assert await refs(gl, 1) == {("commit", SHA)}


async def test_a_fetched_issue_reads_its_notes_too(gl: GitLabEndpoint) -> None:
    """An issue read one by one (a webhook names it) brings its commit mentions as well,
    even when the mention left the issue's updated_at alone."""
    fake = gl.fake
    fake.add_issue(PROJECT, "Quiet")  # 1
    await gl.poll()
    fake.advance(60)
    fake.mention_in_commit(PROJECT, 1, SHA, touch=False)

    assert await gl.sync.refresh([1]) == (1, 1)

    assert await refs(gl, 1) == {("commit", SHA)}
