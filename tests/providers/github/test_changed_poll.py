"""What a poll that finds a change costs, and what it reads in the cursor's own second.

A changed poll's conditional probe of the last page answers 200 with that page as it is
now: when the page starts no later than the poll's window, it is the walk's first page,
so the poll asks the listing once, not twice. GitHub's timestamps are whole seconds (the
fake's clock too), so an issue edited again in the second the cursor stands on keeps its
``updated_at``: it still has its evidence read in that poll, decided by its content, and
an issue whose content that poll already read is not read again.
"""

from __future__ import annotations

from typing import Any

from tests.providers.github._support import REPO, GitHubEndpoint, list_requests


def graphql_asked(gh: GitHubEndpoint, since: int) -> list[Any]:
    """The variables of each GraphQL request from position ``since`` of the log."""
    return [
        (r.body or {}).get("variables")
        for r in gh.fake.requests[since:]
        if r.matches("POST", "/graphql")
    ]


def asked_numbers(gh: GitHubEndpoint, since: int) -> set[int]:
    """The issue and pull request numbers the GraphQL requests asked about."""
    numbers: set[int] = set()
    for variables in graphql_asked(gh, since):
        for key, value in (variables or {}).items():
            if key not in ("owner", "name") and isinstance(value, int):
                numbers.add(value)
    return numbers


async def refs(gh: GitHubEndpoint, number: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gh.get(number))["evidence"]}


async def test_a_changed_poll_asks_the_listing_once(gh: GitHubEndpoint) -> None:
    """Before: the probe's 200 was thrown away and the walk listed again from the cursor:
    probe, listing and GraphQL, where probe and GraphQL do."""
    fake = gh.fake
    fake.bulk_issues(REPO, 150)
    await gh.poll()
    fake.advance(30)
    fake.close_issue(REPO, 3, "not_planned")
    mark, budget = len(fake.requests), fake.rate_remaining

    report = await gh.poll()

    (probe,) = list_requests(fake, mark)
    assert (probe.status, probe.if_none_match is not None) == (200, True)
    assert [r.path for r in fake.requests[mark:]] == [probe.path, "/graphql"]
    assert report.changed == 1
    assert (await gh.get(3))["status"] == "dropped"
    assert budget - fake.rate_remaining <= 2  # the probe's 200 and the evidence


async def test_a_probe_from_inside_the_window_leaves_the_listing_to_the_walk(
    gh: GitHubEndpoint,
) -> None:
    """The last page of a walk can start after the next poll's window (the cursor less
    the overlap): issues edited in that gap would be missing from it, so the walk lists
    from its own window, as before."""
    fake = gh.fake
    fake.bulk_issues(REPO, 90)
    for k in range(40):  # the last page starts among these, inside the overlap
        fake.add_issue(REPO, f"Late {k}", updated_at=fake.clock.seconds + k // 10)
    fake.advance(3)
    await gh.poll()
    last = list_requests(fake)[-1]
    fake.advance(30)
    fake.close_issue(REPO, 7)
    mark = len(fake.requests)

    await gh.poll()

    probe, listing = list_requests(fake, mark)
    assert (probe.query, probe.status) == (last.query, 200)
    assert listing.if_none_match is None
    assert listing.query["since"] < last.query["since"]
    assert (await gh.get(7))["status"] == "done"


async def test_an_edit_in_the_cursors_second_gets_its_evidence_read(gh: GitHubEndpoint) -> None:
    """Before: an issue counted as changed only when its ``updated_at`` was later than
    the cursor, so a second edit in the cursor's second had its title mirrored and its
    timeline never asked: the pull request linked with it waited for a later edit."""
    fake = gh.fake
    fake.bulk_issues(REPO, 5)
    pr = fake.add_pull(REPO, "Fix the crash", "No issue named", head_ref="fix-crash")
    await gh.poll()
    fake.advance(60)
    fake.set_title(fake.issue(REPO, 4), "Crash on start", "octocat")
    await gh.poll()  # the cursor stands on this second now
    assert await refs(gh, 4) == set()

    # The same second (the clock is whole seconds): linked by hand, and renamed again.
    fake.connect(REPO, 4, int(pr["number"]))
    fake.set_title(fake.issue(REPO, 4), "Crash on start, with a fix", "octocat")
    mark = len(fake.requests)
    await gh.poll()

    assert (await gh.get(4))["title"] == "Crash on start, with a fix"
    assert ("review", str(pr["html_url"])) in await refs(gh, 4)
    assert 4 in asked_numbers(gh, mark)

    # Still that second: another issue is edited. Issue 4 reads as that poll read it,
    # so only the new edit has its evidence read.
    fake.set_title(fake.issue(REPO, 5), "Another edit in the same second", "octocat")
    mark = len(fake.requests)
    await gh.poll()

    assert (await gh.get(5))["title"] == "Another edit in the same second"
    assert asked_numbers(gh, mark) == {5}
    assert ("review", str(pr["html_url"])) in await refs(gh, 4)
