"""GitLab evidence reads that stay honest: one issue's refused link read degrades that
issue only; evidence is attributed to the project it lives in, a fast-forward merge gives
the commit that landed, and an issue is mentioned by its work-item address too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.gitlab import mapping
from cotal_tasks.providers.hosted.mentions import mentioned_numbers
from tests.providers.gitlab._support import ISSUES, PROJECT, GitLabEndpoint
from tests.support.fake_gitlab_render import Shapes

Json = dict[str, Any]
FIXTURES = Path(__file__).parents[2] / "fixtures" / "gitlab"


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


# -- attribution and what landed -------------------------------------------------------------

OTHER = "acme/other"


async def refs(gl: GitLabEndpoint, iid: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gl.get(iid))["evidence"]}


async def test_another_projects_merge_request_that_does_not_say_its_path_is_not_ours(
    gl: GitLabEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitLab releases before 12.6 answer merge requests without ``references``; one of
    another project relating to our issue is still attributed to that project."""
    fake = gl.fake
    fake.add_project(OTHER)
    add(gl, "Crash in the parser")  # 1
    fake.advance(60)
    fake.add_merge_request(
        OTHER, "Fix upstream", "See below", source_branch="fix-parser", foreign=[(PROJECT, 1)]
    )
    render = Shapes.merge_request

    def without_references(self: Shapes, mr: Any, *, full: bool = False) -> Json:
        out = render(self, mr, full=full)
        out.pop("references", None)
        return out

    monkeypatch.setattr(Shapes, "merge_request", without_references)
    await gl.poll()
    found = await refs(gl, 1)
    assert ("branch", f"{OTHER}:fix-parser") in found
    assert ("branch", "fix-parser") not in found


async def test_a_fast_forward_merge_gives_the_commit_that_landed(gl: GitLabEndpoint) -> None:
    """Merged by fast-forward: GitLab leaves ``merge_commit_sha`` and ``squash_commit_sha``
    null; the target branch moved to the merge request's head, ``sha``."""
    fake = gl.fake
    iid = add(gl, "Typo")
    fake.advance(60)
    mr = fake.add_merge_request(PROJECT, "Fix the typo", source_branch="typo", closes=[iid])
    fake.advance(60)
    fake.merge_merge_request(PROJECT, int(mr["iid"]))
    fake.project(PROJECT).merge_requests[int(mr["iid"])].merge_commit_sha = None
    await gl.poll()
    assert ("commit", str(mr["sha"])) in await refs(gl, iid)


async def test_an_open_closing_merge_request_gives_no_commit(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = add(gl, "Typo")
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Fix the typo", source_branch="typo", closes=[iid])
    await gl.poll()
    assert not [r for r in await refs(gl, iid) if r[0] == "commit"]


def test_moved_to_id_zero_is_not_moved() -> None:
    """The documented issue (GitLab's ``doc/api/issues.md``, tests/fixtures/gitlab) with
    ``moved_to_id: 0``, as some releases answer for an issue never moved: ids start at 1."""
    (item, *_) = json.loads((FIXTURES / "doc-issues-list.json").read_text(encoding="utf-8"))
    path = str(item["references"]["full"]).rsplit("#", 1)[0]
    assert mapping.tracked(path, {**item, "moved_to_id": 0}).gone is None
    assert mapping.tracked(path, {**item, "moved_to_id": 77}).gone == "moved"


def test_work_item_addresses_and_autolinks_are_mentions() -> None:
    text = (
        "Fixes https://gitlab.example.com/acme/widgets/-/work_items/7 and "
        "https://gitlab.example.com/acme/other/-/work_items/8; GH-9 too"
    )
    assert mentioned_numbers(text, "acme/widgets") == {7, 9}
    assert mentioned_numbers(text, "acme/widgets", autolinks=False) == {7}
    assert mentioned_numbers("see XGH-3, gh-4 and a/GH-5", "o/r") == set()
    assert mentioned_numbers("(GH-12) and GH-13.", "o/r") == {12, 13}
    # GitLab links no GH-N: a merge request saying it names no issue of the project.
    mr = {"title": "GH-3", "description": "https://h/acme/widgets/-/work_items/4"}
    assert mapping.mentioned_issues("acme/widgets", mr) == {4}
