"""GitLab evidence reads that stay honest: one issue's refused link read degrades that
issue only; evidence is attributed to the project it lives in."""

from __future__ import annotations

from tests.providers.gitlab._support import ISSUES, PROJECT, GitLabEndpoint


def add(gl: GitLabEndpoint, title: str) -> int:
    gl.fake.advance(60)
    return int(gl.fake.add_issue(PROJECT, title)["iid"])


async def test_a_refused_closed_by_degrades_that_issue_only(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    first, second = add(gl, "First"), add(gl, "Second")
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Fix the first", source_branch="fix-1", closes=[first])
    fake.add_merge_request(PROJECT, "Fix the second", source_branch="fix-2", closes=[second])
    fake.fail_next(status=403, method="GET", path=f"{ISSUES}/{first}/closed_by")
    report = await gl.poll()
    assert report is not None
    tasks = {t["taskId"]: t for t in await gl.all_tasks()}
    assert len(tasks) == 2  # the poll went on: both issues are mirrored
    one = await gl.get(first)
    assert one["title"] == "First"
    # The refused part is left out; what could be read (the related merge request) stays.
    assert ("branch", "fix-1") in {(e["kind"], e["ref"]) for e in one["evidence"]}
    other = await gl.get(second)
    assert ("branch", "fix-2") in {(e["kind"], e["ref"]) for e in other["evidence"]}
    counts = gl.store.degradations()["counts"]
    assert counts == {"evidence-refused": 1}
    assert (await gl.store.freshness()) is None  # the endpoint is not failing


async def test_a_refused_related_merge_requests_read_degrades_that_issue_only(
    gl: GitLabEndpoint,
) -> None:
    fake = gl.fake
    first, second = add(gl, "First"), add(gl, "Second")
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Fix it", source_branch="fix-2", closes=[second])
    fake.fail_next(status=404, method="GET", path=f"{ISSUES}/{second}/related_merge_requests")
    await gl.poll()
    assert len(await gl.all_tasks()) == 2
    assert gl.store.degradations()["counts"] == {"evidence-refused": 1}
    assert (await gl.get(first))["title"] == "First"
