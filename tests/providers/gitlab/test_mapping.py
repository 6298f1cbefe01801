"""GitLab issues as tasks, through a real poll of the fake GitLab: ``opened``/``closed`` and
scoped ``workflow::`` labels through the ordered status rules (``statusSource`` carries the
native value that decided), several workflow labels at once on GitLab Free, several
assignees (a human never binds; a seat-directory account with a fresh presence card does),
and related merge requests as evidence."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import (
    BLOCKED,
    BUILDER,
    CLAIMED,
    HUMAN,
    ISSUES,
    MERGE_REQUESTS,
    PROJECT,
    REVIEWER,
    REVIEWER_USER,
    SEAT_USER,
    WONT_DO,
    GitLabEndpoint,
    fetched_iids,
)
from tests.support.fake_gitlab import FakeGitLab, parse_iso

Json = dict[str, object]


def add(fake: FakeGitLab, title: str, description: str | None = "", **fields: Any) -> int:
    """An issue; every one a minute after the last, so the listing order is the iid order."""
    fake.advance(60)
    return int(fake.add_issue(PROJECT, title, description, **fields)["iid"])


def status_of(record: Json) -> tuple[object, object]:
    return record["status"], record.get("statusSource")


def triple(record: Json) -> tuple[object, ...] | None:
    binding = record.get("binding")
    if binding is None:
        return None
    assert isinstance(binding, dict)
    return (binding["owner"], binding["actor"], binding["lifecycleUid"])


# -- states and the workflow labels ------------------------------------------------------


async def test_states_and_workflow_labels_map_through_the_default_rules(
    gl: GitLabEndpoint, presence: DictPresence
) -> None:
    """With the seat assigned (and present), ``workflow::`` labels decide the status and are
    the ``statusSource``; without a seat the invariant turns claimed/blocked into open and
    keeps the label as ``statusSource``; ``closed`` is done unless a dropped label says so."""
    fake = gl.fake
    presence.put(BUILDER, environment=None)
    seat: dict[str, Any] = {"assignees": [SEAT_USER]}
    cases = {
        add(fake, "Plain open"): ("open", "opened"),
        add(fake, "Plain closed", state="closed"): ("done", "closed"),
        add(fake, "Won't do", state="closed", labels=[WONT_DO]): ("dropped", WONT_DO),
        add(fake, "Cancelled", state="closed", labels=["workflow::cancelled"]): (
            "dropped",
            "workflow::cancelled",
        ),
        add(fake, "In progress", labels=[CLAIMED], **seat): ("claimed", CLAIMED),
        add(fake, "In review", labels=["workflow::in review"], **seat): (
            "claimed",
            "workflow::in review",
        ),
        add(fake, "Blocked", labels=[BLOCKED, "bug"], **seat): ("blocked", BLOCKED),
        # No seat: nobody is known to work on it, so it is open; the label stays the source.
        add(fake, "In progress, nobody", labels=[CLAIMED]): ("open", CLAIMED),
        add(fake, "Blocked, nobody", labels=[BLOCKED]): ("open", BLOCKED),
        # An open issue assigned to a present seat is claimed, whatever its labels say.
        add(fake, "Assigned, no label", **seat): ("claimed", "opened"),
        # Closed wins over any workflow label but the dropped ones.
        add(fake, "Closed in progress", state="closed", labels=[CLAIMED]): ("done", "closed"),
        # A dropped label on an open issue is no rule's business: it is open.
        add(fake, "Open won't do", labels=[WONT_DO]): ("open", "opened"),
        # Labels match case-insensitively; the statusSource is the issue's own spelling.
        add(fake, "Shouting", labels=["Workflow::Blocked"], **seat): (
            "blocked",
            "Workflow::Blocked",
        ),
        # Other scopes are not workflow: they never decide a status.
        add(fake, "Priority", labels=["priority::high"]): ("open", "opened"),
    }

    await gl.poll()

    got = {iid: status_of(await gl.get(iid)) for iid in cases}
    assert got == cases
    for iid, (status, _) in cases.items():
        bound = triple(await gl.get(iid))
        if status in ("claimed", "blocked"):
            assert bound == (BUILDER.owner, BUILDER.actor, BUILDER.lifecycleUid), iid
        else:
            assert bound is None, iid


async def test_several_workflow_labels_are_resolved_by_rule_order(
    gitlab: FakeGitLab, gl: GitLabEndpoint, presence: DictPresence
) -> None:
    """GitLab Free keeps several ``workflow::`` labels on one issue. The first matching rule
    wins, so the **rule order** decides, never the order of the labels on the issue. With
    the default rules (docs/gitlab.md):

    - ``workflow::in progress`` + ``workflow::blocked`` (either order) -> blocked, source
      ``workflow::blocked`` (the blocked rule precedes the claimed rules);
    - ``workflow::in review`` + ``workflow::in progress`` -> claimed, source
      ``workflow::in progress`` (its rule precedes the in-review rule);
    - closed with ``workflow::cancelled`` + ``workflow::won't do`` -> dropped, source
      ``workflow::won't do``;
    - closed with ``workflow::blocked`` + ``workflow::in progress`` -> done, source ``closed``.
    """
    fake = gitlab
    fake.exclusive_scoped_labels = False  # GitLab Free
    presence.put(BUILDER, environment=None)
    seat: dict[str, Any] = {"assignees": [SEAT_USER]}
    a = add(fake, "a", labels=[CLAIMED, BLOCKED], **seat)
    b = add(fake, "b", labels=[BLOCKED, CLAIMED], **seat)
    c = add(fake, "c", labels=["workflow::in review", CLAIMED], **seat)
    d = add(fake, "d", state="closed", labels=["workflow::cancelled", WONT_DO])
    e = add(fake, "e", state="closed", labels=[BLOCKED, CLAIMED])
    # Labels that coexist only on Free: a write through the API keeps both there.
    fake.set_labels(fake.issue(PROJECT, c), ["workflow::in review", CLAIMED])
    assert fake.issue(PROJECT, c).labels == ["workflow::in review", CLAIMED]

    await gl.poll()

    assert status_of(await gl.get(a)) == ("blocked", BLOCKED)
    assert status_of(await gl.get(b)) == ("blocked", BLOCKED)
    assert status_of(await gl.get(c)) == ("claimed", CLAIMED)
    assert status_of(await gl.get(d)) == ("dropped", WONT_DO)
    assert status_of(await gl.get(e)) == ("done", "closed")


async def test_title_and_description_become_title_and_brief(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = add(fake, "Parser crashes on empty input", "It crashes.\n\nSteps: run it.")
    untitled = add(fake, "x" * 250, None)
    await gl.poll()
    record = await gl.get(iid)
    assert record["title"] == "Parser crashes on empty input"
    assert record["brief"] == "It crashes.\u2029Steps: run it."  # its paragraphs are kept
    assert record["createdAt"] == parse_iso(str(fake.issue_json(PROJECT, iid)["created_at"]))
    long = await gl.get(untitled)
    assert len(str(long["title"]).encode()) <= 200  # cut at a safe boundary
    assert "brief" not in long


# -- assignees and the seat directory ----------------------------------------------------


async def test_several_assignees_only_a_present_seat_binds(
    gl: GitLabEndpoint, presence: DictPresence
) -> None:
    fake = gl.fake
    presence.put(BUILDER, environment="k8s://cluster-a/ns/build", lifecycle_uid="7" * 26)
    presence.put(REVIEWER, environment=None, fresh=False)  # a stale card: not known to run
    human_only = add(fake, "human", labels=[CLAIMED], assignees=[HUMAN])
    human_and_seat = add(fake, "mixed", labels=[CLAIMED], assignees=[HUMAN, SEAT_USER])
    seat_no_label = add(fake, "seat only", assignees=[SEAT_USER])
    stale_then_fresh = add(
        fake, "two seats", labels=[CLAIMED], assignees=[REVIEWER_USER, SEAT_USER]
    )
    stale_only = add(fake, "stale seat", labels=[CLAIMED], assignees=[REVIEWER_USER])
    unknown_seat = add(fake, "nobody's card", labels=[BLOCKED], assignees=["someone-else"])

    await gl.poll()

    present = ("local", "builder", "7" * 26)  # the uid the presence card carries
    assert status_of(await gl.get(human_only)) == ("open", CLAIMED)
    assert triple(await gl.get(human_only)) is None  # a human assignee never binds
    assert status_of(await gl.get(human_and_seat)) == ("claimed", CLAIMED)
    assert triple(await gl.get(human_and_seat)) == present
    assert status_of(await gl.get(seat_no_label)) == ("claimed", "opened")
    assert triple(await gl.get(seat_no_label)) == present
    assert triple(await gl.get(stale_then_fresh)) == present  # the first with a known uid
    assert status_of(await gl.get(stale_only)) == ("open", CLAIMED)
    assert triple(await gl.get(stale_only)) is None
    assert status_of(await gl.get(unknown_seat)) == ("open", BLOCKED)
    binding = (await gl.get(human_and_seat))["binding"]
    assert isinstance(binding, dict)
    assert binding["boundBy"] == "tracker-sync"
    assert "environment" not in binding  # the sync knows the seat, not its environment


async def test_a_seat_that_appears_later_binds_on_the_next_change(
    gl: GitLabEndpoint, presence: DictPresence
) -> None:
    fake = gl.fake
    iid = add(fake, "Waiting for a seat", labels=[CLAIMED], assignees=[SEAT_USER])
    await gl.poll()
    assert triple(await gl.get(iid)) is None
    presence.put(BUILDER, environment=None)
    fake.advance(60)
    fake.touch(PROJECT, iid)
    await gl.poll()
    assert triple(await gl.get(iid)) == (BUILDER.owner, BUILDER.actor, BUILDER.lifecycleUid)
    assert status_of(await gl.get(iid)) == ("claimed", CLAIMED)


# -- evidence ----------------------------------------------------------------------------


async def test_related_merge_requests_become_evidence(gl: GitLabEndpoint) -> None:
    """review = the MR's URL, branch = its source branch, run = its head pipeline's URL,
    commit = the merge commit of the MR that closed the issue (and only that one)."""
    fake = gl.fake
    fixed = add(fake, "The parser crashes on empty input")
    other = add(fake, "Unrelated")
    fake.advance(60)
    closing = fake.add_merge_request(
        PROJECT, "Guard empty input", source_branch="fix/empty-input", closes=[fixed]
    )
    fake.advance(60)
    mention = fake.add_merge_request(
        PROJECT,
        "Refactor the lexer",
        f"Prepares #{fixed}",
        source_branch="lexer",
        mentions=[fixed],
        pipeline_status=None,  # no pipeline: no run
    )
    fake.advance(60)
    sha = fake.merge_merge_request(PROJECT, int(closing["iid"]))
    full = fake.merge_request_json(PROJECT, int(closing["iid"]))
    pipeline = full["head_pipeline"]
    assert isinstance(pipeline, dict)
    mark = len(fake.requests)

    await gl.poll()

    record = await gl.get(fixed)
    assert status_of(record) == ("done", "closed")
    evidence = record["evidence"]
    assert isinstance(evidence, list)
    assert sorted((e["kind"], e["ref"]) for e in evidence) == sorted(
        [
            ("review", str(closing["web_url"])),
            ("branch", "fix/empty-input"),
            ("run", str(pipeline["web_url"])),
            ("commit", sha),
            ("review", str(mention["web_url"])),
            ("branch", "lexer"),
        ]
    )
    assert closing["web_url"] == f"https://gitlab.example.com/{PROJECT}/-/merge_requests/1"
    assert str(pipeline["web_url"]).startswith(f"https://gitlab.example.com/{PROJECT}/-/pipelines/")
    commit = next(e for e in evidence if e["kind"] == "commit")
    assert commit["addedAt"] == parse_iso(str(full["merged_at"]))
    added = [e["addedAt"] for e in evidence]
    assert added == sorted(added)  # newest last
    assert (await gl.get(other))["evidence"] == []
    assert fetched_iids(fake, mark) == []  # its evidence came with the listing
    assert len(fake.calls("GET", f"{ISSUES}/{fixed}/related_merge_requests")) == 1
    assert len(fake.calls("GET", f"{ISSUES}/{fixed}/closed_by")) == 1
    assert {r.path for r in fake.calls("GET", f"{MERGE_REQUESTS}/*")} == {
        f"{MERGE_REQUESTS}/{closing['iid']}",
        f"{MERGE_REQUESTS}/{mention['iid']}",
    }


async def test_an_unmerged_closing_merge_request_gives_no_commit(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = add(fake, "Still open")
    fake.advance(60)
    mr = fake.add_merge_request(PROJECT, "WIP fix", source_branch="wip", closes=[iid])
    await gl.poll()
    record = await gl.get(iid)
    evidence = record["evidence"]
    assert isinstance(evidence, list)
    assert {e["kind"] for e in evidence} == {"review", "branch", "run"}
    assert ("review", mr["web_url"]) in {(e["kind"], e["ref"]) for e in evidence}
    assert status_of(record) == ("open", "opened")


@pytest.mark.parametrize("other_project", ["acme/elsewhere", "other/widgets"])
async def test_a_merge_request_naming_another_projects_issue_links_nothing_here(
    gl: GitLabEndpoint, other_project: str
) -> None:
    fake = gl.fake
    add(fake, "Here")
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Upstream", f"Fixes {other_project}#1", source_branch="up")
    mark = len(fake.requests)
    report = await gl.poll()
    assert report.fetched == 0
    assert fetched_iids(fake, mark) == []
