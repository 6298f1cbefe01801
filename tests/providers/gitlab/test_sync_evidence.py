"""GitLab evidence: every merge request the tracker relates to an issue, all pages read,
attributed to the project it lives in (no webhook involved)."""

from __future__ import annotations

import pytest

from tests.providers.gitlab._support import ISSUES, PROJECT, GitLabEndpoint
from tests.support.fake_gitlab import FakeGitLab

OTHER = "acme/other"
FORK = "contributor/widgets"


async def refs(gl: GitLabEndpoint, iid: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gl.get(iid))["evidence"]}


def pipeline_url(fake: FakeGitLab, project: str, iid: int) -> str:
    pipeline = fake.merge_request_json(project, iid)["head_pipeline"]
    assert isinstance(pipeline, dict)
    return str(pipeline["web_url"])


# -- finding 2: attribution ----------------------------------------------------------------


async def test_a_merge_request_of_another_project_keeps_its_own_reference(
    gl: GitLabEndpoint,
) -> None:
    """``OTHER``!1 names our #1; our own !1 is unrelated. The evidence is ``OTHER``'s
    merge request, never our !1 with its branch and pipeline."""
    fake = gl.fake
    fake.add_project(OTHER)
    fake.add_issue(PROJECT, "Crash in the parser")  # 1
    fake.add_merge_request(PROJECT, "Unrelated", "Nothing", source_branch="unrelated-work")
    fake.advance(60)
    upstream = fake.add_merge_request(
        OTHER, "Fix upstream", "See below", source_branch="fix-parser", foreign=[(PROJECT, 1)]
    )
    fake.advance(60)
    sha = fake.merge_merge_request(OTHER, 1)

    await gl.poll()

    assert await refs(gl, 1) == {
        ("review", str(upstream["web_url"])),
        ("branch", f"{OTHER}:fix-parser"),
        ("run", pipeline_url(fake, OTHER, 1)),
    }
    assert str(upstream["web_url"]).endswith(f"{OTHER}/-/merge_requests/1")
    assert sha  # merged, but it does not close our issue: no commit
    assert fake.calls("GET", f"/api/v4/projects/{fake.project(OTHER).id}/merge_requests/1")


async def test_a_fork_merge_request_branch_is_the_forks(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.add_project(FORK)
    fake.add_issue(PROJECT, "Typo in the docs")  # 1
    fake.advance(60)
    mr = fake.add_merge_request(
        PROJECT, "Fix the typo", source_branch="patch-1", source_project=FORK, closes=[1]
    )

    await gl.poll()

    assert ("branch", f"{FORK}:patch-1") in await refs(gl, 1)
    assert ("review", str(mr["web_url"])) in await refs(gl, 1)
    assert ("branch", "patch-1") not in await refs(gl, 1)


# -- finding 3: completeness -----------------------------------------------------------------


async def test_every_page_of_related_merge_requests_is_read(gl: GitLabEndpoint) -> None:
    """25 merge requests relate to #1; GitLab's default page holds 20. The newest ones
    (21 to 25) were never read before."""
    fake = gl.fake
    fake.add_issue(PROJECT, "A popular bug")  # 1
    urls = []
    for k in range(1, 26):
        fake.advance(60)
        mr = fake.add_merge_request(
            PROJECT, f"Try {k}", f"Relates to #1 ({k})", source_branch=f"try-{k}",
            mentions=[1], pipeline_status=None,
        )  # fmt: skip
        urls.append(str(mr["web_url"]))

    await gl.poll()

    found = await refs(gl, 1)
    assert len(found) == 32  # the newest 32 of 50 (a review and a branch each)
    assert {("review", url) for url in urls[-16:]} <= found
    assert ("branch", "try-25") in found
    related = fake.calls("GET", f"{ISSUES}/1/related_merge_requests")
    assert [r.query.get("per_page") for r in related] == ["100"]


@pytest.mark.parametrize(
    ("kind", "then"), [("issues", "hook"), ("work_items", "interval"), ("issues", "sync")]
)
async def test_an_issue_address_in_a_merge_request_links_it(
    gl: GitLabEndpoint, kind: str, then: str
) -> None:
    """A merge request that names the issue by its web address (its issue or work-item
    form), on an issue GitLab did not touch: the merge-request sweep reads the address.
    No issue changed, so the sweep waits for its cadence: the poll after a Merge Request
    Hook said the project moved reads it, as does a poll to the present (the CLI's
    ``sync``), else the first poll past ``merge_requests_interval_s``."""
    fake = gl.fake
    gl.sync_on_tracker_time()
    fake.bulk_issues(PROJECT, 5)
    await gl.poll()
    fake.advance(60)
    body = f"Follows up {fake.web_url}/{PROJECT}/-/{kind}/2 (not acme/elsewhere#3)"
    mr = fake.add_merge_request(
        PROJECT, "Follow-up", body, source_branch="follow-up", mentions=[2], touch_issues=False
    )
    mark = len(fake.requests)

    await gl.poll()  # nothing says the project moved: one request, the issue listing
    assert len(fake.requests) - mark == 1
    assert await refs(gl, 2) == set()

    if then == "hook":  # what a first Merge Request Hook delivery records
        target = gl.hosted.webhook
        assert target is not None
        assert await target.first_delivery("gitlab:mr-hook-1", moved=True)
    elif then == "interval":
        fake.advance(300)
    if then == "sync":
        await gl.sync.poll_once(present=True)
    else:
        await gl.poll()

    assert ("review", str(mr["web_url"])) in await refs(gl, 2)
    assert await refs(gl, 3) == set()


async def test_a_merge_request_the_issue_names_becomes_evidence(gl: GitLabEndpoint) -> None:
    """An issue whose description (or a comment) names ``!2`` relates that merge request:
    the issue changed, so its related merge requests are read."""
    fake = gl.fake
    fake.bulk_issues(PROJECT, 3)
    fake.add_merge_request(PROJECT, "One", "Unrelated", source_branch="one")
    two = fake.add_merge_request(PROJECT, "Two", "Unrelated too", source_branch="two")
    await gl.poll()
    fake.advance(60)
    fake.add_note(PROJECT, 2, "Superseded by !2")

    await gl.poll()

    assert ("review", str(two["web_url"])) in await refs(gl, 2)
    assert ("branch", "two") in await refs(gl, 2)
    assert await refs(gl, 1) == set()
