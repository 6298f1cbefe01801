"""Two-way assignees on GitLab: a person's assignee is never removed by the bridge's
write. GitLab's REST API sets assignees only as a whole list, so a claim reads the
issue right before it writes and, after it, reads GitLab's system notes; an assignee a
person added in between is put back. The person's edit lands before, during (between the
bridge's read and its write) and after the claim."""

from __future__ import annotations

from cotal_tasks.providers.gitlab import assignees
from tests.providers.gitlab._support import (
    BUILDER,
    ISSUES,
    PROJECT,
    SEAT_USER,
    GitLabEndpoint,
    task_id,
)
from tests.support.fake_gitlab import FakeGitLab


async def one_issue(gl: GitLabEndpoint) -> int:
    gl.fake.advance(60)
    iid = int(gl.fake.add_issue(PROJECT, "Shared work")["iid"])
    await gl.poll()
    return iid


def person_assigns_before_the_write(fake: FakeGitLab, iid: int, who: str) -> None:
    """Just before GitLab answers the bridge's assignee write (after the bridge read the
    issue), a person assigns ``who`` in GitLab's UI."""
    done: list[bool] = []

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PUT" and path == f"{ISSUES}/{iid}" and not done:
            done.append(True)
            fake.advance(1)
            fake.assign(PROJECT, iid, who, by="carol")

    fake.before_answer = hook


def assigned(fake: FakeGitLab, iid: int) -> list[str]:
    return list(fake.issue(PROJECT, iid).assignees)


async def test_a_person_assigning_during_the_claim_keeps_their_assignee(
    gl: GitLabEndpoint,
) -> None:
    iid = await one_issue(gl)
    person_assigns_before_the_write(gl.fake, iid, "dave")
    claimed = await gl.client.claim(BUILDER, task_id(iid))
    gl.fake.before_answer = None
    assert claimed["status"] == "claimed"
    assert sorted(assigned(gl.fake, iid)) == sorted([SEAT_USER, "dave"])
    # Nothing more to repair: three idle polls write nothing.
    writes = len(gl.fake.writes)
    for _ in range(3):
        gl.fake.advance(5)
        await gl.poll()
    assert len(gl.fake.writes) == writes
    assert sorted(assigned(gl.fake, iid)) == sorted([SEAT_USER, "dave"])


async def test_a_person_assigning_before_or_after_the_claim_keeps_their_assignee(
    gl: GitLabEndpoint,
) -> None:
    before = await one_issue(gl)
    gl.fake.advance(1)
    gl.fake.assign(PROJECT, before, "dave", by="carol")  # before the claim's read
    await gl.client.claim(BUILDER, task_id(before))
    assert sorted(assigned(gl.fake, before)) == sorted(["dave", SEAT_USER])
    after = await one_issue(gl)
    await gl.client.claim(BUILDER, task_id(after))
    gl.fake.advance(1)
    gl.fake.assign(PROJECT, after, "erin", by="carol")  # after: GitLab holds both
    assert sorted(assigned(gl.fake, after)) == sorted([SEAT_USER, "erin"])


async def test_an_unassign_the_seat_asked_for_is_not_undone(gl: GitLabEndpoint) -> None:
    """The repair puts back only what a person added: the seat's own unassign (a release
    of the task) stays, and a person who added then removed someone is not overridden."""
    iid = await one_issue(gl)
    await gl.client.claim(BUILDER, task_id(iid))
    gl.fake.advance(1)
    gl.fake.assign(PROJECT, iid, "dave", by="carol")
    gl.fake.advance(1)
    issue = gl.fake.issue(PROJECT, iid)
    gl.fake.set_assignees(issue, [SEAT_USER], by="carol")  # carol changes her mind
    await gl.poll()
    await gl.client.administer(task_id(iid), status="open", unbind=True)
    assert assigned(gl.fake, iid) == []


def test_gitlab_system_notes_are_read_as_assignee_changes() -> None:
    """The note texts of ``SystemNotes::IssuablesService#change_issuable_assignees``
    (gitlabhq, app/services/system_notes/issuables_service.rb, its doc comment examples)."""
    assert assignees.changes_in(
        "assigned to @user1, @user2 and @user3 and unassigned @user4 and @user5"
    ) == (
        {"user1", "user2", "user3"},
        {"user4", "user5"},
    )
    assert assignees.changes_in("assigned to @user1 additionally to @user2") == ({"user1"}, set())
    assert assignees.changes_in("unassigned @first.last") == (set(), {"first.last"})
    assert assignees.changes_in("removed all assignees") == (set(), None)
    assert assignees.changes_in("mentioned in commit 54f7727c") is None
    notes = [
        {
            "id": 1,
            "system": True,
            "body": "assigned to @dave",
            "author": {"username": "carol"},
            "created_at": "2026-01-01T00:00:02.000Z",
        },
        {
            "id": 2,
            "system": True,
            "body": "assigned to @bot and unassigned @dave",
            "author": {"username": "bot"},
            "created_at": "2026-01-01T00:00:03.000Z",
        },
        {
            "id": 3,
            "system": True,
            "body": "assigned to @old",
            "author": {"username": "carol"},
            "created_at": "2026-01-01T00:00:00.000Z",
        },
    ]
    since = 1767225601000  # 2026-01-01T00:00:01Z: the read before the write
    assert assignees.added_by_people(notes, since, "bot") == {"dave"}
    assert assignees.lost(notes, since, "bot", {"assignees": [{"username": "bot"}]}, ()) == ["dave"]


async def test_on_one_assignee_per_issue_the_persons_assignee_wins(gl: GitLabEndpoint) -> None:
    """GitLab Free keeps one assignee: the person's, added during the claim, takes the
    place back, and the claim rides on the workflow label."""
    gl.fake.single_assignee = True
    iid = await one_issue(gl)
    person_assigns_before_the_write(gl.fake, iid, "dave")
    claimed = await gl.client.claim(BUILDER, task_id(iid))
    gl.fake.before_answer = None
    assert claimed["status"] == "claimed"
    assert assigned(gl.fake, iid) == ["dave"]
    assert "workflow::in progress" in gl.fake.issue(PROJECT, iid).labels


async def test_a_refused_check_after_the_write_costs_only_the_check(gl: GitLabEndpoint) -> None:
    """The write has landed when the check runs: GitLab refusing ``GET /user`` or the
    notes read leaves the claim answered as it is, never as refused."""
    iid = await one_issue(gl)
    gl.fake.fail_next(status=404, method="GET", path=f"{ISSUES}/{iid}/notes")
    assert (await gl.client.claim(BUILDER, task_id(iid)))["status"] == "claimed"
    assert assigned(gl.fake, iid) == [SEAT_USER]
    assert not gl.fake.failures  # the notes were asked for, and refused


async def test_a_token_gitlab_will_not_name_still_claims(gl: GitLabEndpoint) -> None:
    iid = await one_issue(gl)
    gl.fake.fail_next(status=403, method="GET", path="/api/v4/user")
    assert (await gl.client.claim(BUILDER, task_id(iid)))["status"] == "claimed"
    assert assigned(gl.fake, iid) == [SEAT_USER]
    assert not gl.fake.failures  # asked, refused: the check skipped, the claim answered


async def test_one_refusal_of_get_user_does_not_turn_the_check_off(gl: GitLabEndpoint) -> None:
    """Before: one 401 on ``GET /user`` was remembered as "GitLab does not say who the
    token is", and no claim's assignees were checked again until a restart."""
    first = await one_issue(gl)
    gl.fake.fail_next(status=401, method="GET", path="*/user")
    person_assigns_before_the_write(gl.fake, first, "dave")
    await gl.client.claim(BUILDER, task_id(first))
    assert assigned(gl.fake, first) == [SEAT_USER]  # not checked this once: dave lost
    second = await one_issue(gl)
    person_assigns_before_the_write(gl.fake, second, "erin")
    await gl.client.claim(BUILDER, task_id(second))
    gl.fake.before_answer = None
    assert sorted(assigned(gl.fake, second)) == sorted([SEAT_USER, "erin"])  # checked again
