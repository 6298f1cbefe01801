"""The rotating reference sweep (``reference_sweep``): a pull request of another repository
that references an issue makes only a ``cross-referenced`` event on the issue's timeline
(no listing, no issue event, no ``updated_at`` shows it). Each poll reads the link counts
of the next 100 open issues in one GraphQL request and reads again each issue whose count
moved, so the link reaches its task within ceil(open issues / 100) polls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.github import sweep
from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, open_github
from tests.support import fake_github_graphql
from tests.support.fake_github import FakeGitHub

OTHER = "octo-org/upstream"


async def refs(gh: GitHubEndpoint, number: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gh.get(number))["evidence"]}


def sent(fake: FakeGitHub, since: int) -> list[tuple[str, int]]:
    return [(r.path, r.status) for r in fake.requests[since:]]


async def settled(gh: GitHubEndpoint, issues: int) -> None:
    """``issues`` open issues, imported, one poll past the overlap, and the sweep's first
    lap (which only records counts) done."""
    gh.fake.bulk_issues(REPO, issues)
    await gh.poll()  # the import
    gh.fake.advance(60)
    await gh.poll()  # past the overlap
    for _ in range(issues // sweep.PAGE + 1):
        if sweep.SweepState.load((await gh.checkpoint()).get(sweep.SWEEP)).lap > 0:
            break
        await gh.poll()


def cross_reference(fake: FakeGitHub, number: int) -> str:
    """A pull request of another repository names issue ``number``; its URL."""
    fake.advance(60)
    pr = fake.add_pull(
        OTHER, f"Up {number}", "x", head_ref=f"up-{number}", references=[(REPO, number)]
    )
    return str(pr["html_url"])


@pytest.mark.parametrize("on", [True, False])
async def test_another_repositorys_pull_request_becomes_evidence_within_one_poll(
    fake: FakeGitHub, github_url: str, tmp_path: Path, on: bool
) -> None:
    """Before (off): the link never reaches the task, poll after poll. After (on): the
    next poll finds it, at one GraphQL request for the counts and one read of the issue."""
    fake.add_repo(OTHER)
    async with open_github(fake, github_url, tmp_path / "b", reference_sweep=on) as gh:
        await settled(gh, 5)
        url = cross_reference(fake, 3)
        mark = len(fake.requests)

        await gh.poll()

        if on:
            assert sent(fake, mark) == [
                (ISSUES, 304),
                ("/graphql", 200),  # the sweep: counts of the open issues
                (f"{ISSUES}/3", 200),
                ("/graphql", 200),  # its evidence
            ]
            assert ("review", url) in await refs(gh, 3)
            assert ("branch", f"{OTHER}:up-3") in await refs(gh, 3)
        else:
            assert sent(fake, mark) == [(ISSUES, 304)]
            await gh.poll()
            assert ("review", url) not in await refs(gh, 3)
        assert await refs(gh, 2) == set()


async def test_an_unchanged_poll_costs_one_graphql_request_more(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """With the issue events feed and the sweep on: the listing's conditional request
    (304; the feed is not due within its interval) and exactly one GraphQL request; no
    issue is read."""
    async with open_github(
        fake, github_url, tmp_path / "b", reference_sweep=True, reference_events=True
    ) as gh:
        await settled(gh, 5)
        for _ in range(2):
            fake.advance(60)
            mark = len(fake.requests)
            await gh.poll()
            assert sent(fake, mark) == [(ISSUES, 304), ("/graphql", 200)]


async def test_the_cursor_wraps_over_more_than_a_page_of_open_issues(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """150 open issues: two polls look at every one, the third starts over. A link on the
    second page is found by the poll that reads that page; closed issues leave the counts."""
    fake.add_repo(OTHER)
    async with open_github(fake, github_url, tmp_path / "b", reference_sweep=True) as gh:
        await settled(gh, 150)
        state = sweep.SweepState.load((await gh.checkpoint()).get(sweep.SWEEP))
        assert (state.after, state.lap, len(state.counts)) == (None, 1, 150)

        early, late = cross_reference(fake, 20), cross_reference(fake, 140)
        fake.close_issue(REPO, 60)
        found = []
        for _ in range(2):
            fake.advance(60)
            await gh.poll()
            found.append(
                (("review", early) in await refs(gh, 20), ("review", late) in await refs(gh, 140))
            )
        assert found == [(True, False), (True, True)]

        state = sweep.SweepState.load((await gh.checkpoint()).get(sweep.SWEEP))
        assert (state.after, state.lap, len(state.counts)) == (None, 2, 149)
        assert 60 not in state.counts

        fake.advance(60)
        mark = len(fake.requests)
        await gh.poll()  # a new lap: nothing moved, nothing read
        assert [p for p, _ in sent(fake, mark)] == [ISSUES, "/graphql"]
        state = sweep.SweepState.load((await gh.checkpoint()).get(sweep.SWEEP))
        assert (state.after is not None, state.lap) == (True, 2)


async def test_an_issue_opened_after_the_first_lap_is_read_when_it_has_links(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """New to the sweep after its first lap: read when its timeline holds a link (the walk
    saw the issue open before another repository linked it), left alone when it holds none."""
    fake.add_repo(OTHER)
    async with open_github(fake, github_url, tmp_path / "b", reference_sweep=True) as gh:
        await settled(gh, 3)
        fake.advance(60)
        plain = int(fake.add_issue(REPO, "Plain")["number"])
        linked = int(fake.add_issue(REPO, "Linked")["number"])
        fake.advance(60)
        mark = len(fake.requests)
        await gh.poll()  # the walk lists both; the sweep sees them first with no links
        assert [p for p, _ in sent(fake, mark) if p.startswith(f"{ISSUES}/")] == []

        url = cross_reference(fake, linked)
        fake.advance(60)
        await gh.poll()
        assert ("review", url) in await refs(gh, linked)
        assert await refs(gh, plain) == set()


def odd_answers(monkeypatch: pytest.MonkeyPatch, shapes: list[Any]) -> None:
    """The next sweep answers replaced by ``shapes`` (a ``data`` each), one per answer."""
    real = fake_github_graphql.execute

    def execute(fake: FakeGitHub, query: str, variables: Any) -> Any:
        if "issues(" in query and shapes:
            return {"data": shapes.pop(0)}
        return real(fake, query, variables)

    monkeypatch.setattr(fake_github_graphql, "execute", execute)


async def test_malformed_sweep_answers_are_counted_not_fatal(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of another shape, odd nodes and a refused query (an answer without data)
    each count as ``evidence-refused``; every poll succeeds, and the sweep goes on."""
    fake.add_repo(OTHER)
    async with open_github(fake, github_url, tmp_path / "b", reference_sweep=True) as gh:
        await settled(gh, 5)
        url = cross_reference(fake, 2)
        odd_node = {"number": "two", "timelineItems": {"totalCount": -1}}
        page = {"pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": [odd_node]}
        odd_answers(
            monkeypatch,
            [
                {"repository": {"issues": "a page"}},
                {"repository": {"issues": page}},
                None,  # no data: the query is refused
            ],
        )
        for _ in range(3):
            fake.advance(60)
            report = await gh.poll()
            assert report.not_modified
        assert gh.store.degradations()["counts"] == {"evidence-refused": 3}
        assert ("review", url) not in await refs(gh, 2)

        fake.advance(60)
        await gh.poll()  # the real answer again: the link is found
        assert ("review", url) in await refs(gh, 2)
        assert await gh.store.freshness() is None


def test_a_checkpoint_entry_of_another_shape_starts_the_sweep_afresh() -> None:
    assert sweep.SweepState.load("nonsense") == sweep.SweepState()
    held = {"after": 7, "lap": "x", "counts": {"3": [1, 0], "x": [1, 0], "4": [1], "5": "2"}}
    assert sweep.SweepState.load(held) == sweep.SweepState(None, 0, {3: (1, 0)})
    state = sweep.SweepState("c", 2, {3: (1, 2)})
    assert sweep.SweepState.load(state.dump()) == state


def test_a_lap_records_first_then_reads_what_moved() -> None:
    """The first lap reads nothing; after it, a moved count and a new issue with links are
    read; a new issue without links is not; the lap's end drops issues it did not see,
    unless an odd node of the last page may have been one of them."""
    first = sweep.SweepPage({1: 0, 2: 3}, "c2", True)
    last = sweep.SweepPage({3: 1}, "c3", False)
    state, read = sweep.advance(sweep.SweepState(), first)
    assert (state.after, state.lap, read) == ("c2", 0, [])
    state, read = sweep.advance(state, last)
    assert (state.after, state.lap, read) == (None, 1, [])

    moved = sweep.SweepPage({1: 1, 2: 3, 4: 0, 5: 2}, None, False)  # 3 closed; 4, 5 new
    after, read = sweep.advance(state, moved)
    assert read == [1, 5]
    assert after == sweep.SweepState(None, 2, {1: (1, 1), 2: (3, 1), 4: (0, 1), 5: (2, 1)})

    odd = sweep.SweepPage({1: 0}, None, False, odd=1)
    after, read = sweep.advance(state, odd)
    assert (read, sorted(after.counts)) == ([], [1, 2, 3])
