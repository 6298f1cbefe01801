"""Two-way on a running bridge, with GitLab's webhooks: a person assigns someone and adds a
label while a seat's claim writes (between the bridge's read and its write), and the
person's Issue Hook comes late (after the claim answered), twice (GitLab's retry, the same
``Idempotency-Key``), or not at all. Each way the person's edit and the seat's claim both
stand on GitLab and in the mirror, and three idle polls write nothing more."""

from __future__ import annotations

import uuid

import pytest

from tests.bridge._support import Client
from tests.conftest import seat
from tests.providers.gitlab._support import CLAIMED, ISSUES, PROJECT, SEAT_USER, task_id
from tests.providers.gitlab.test_webhooks import Running, running
from tests.providers.hosted_support import hosted_parts
from tests.support.fake_gitlab import issue_hook_payload
from tests.support.polling import eventually

__all__ = ["running"]  # the running bridge of the webhook tests
BUILDER = seat("builder", 1)
ISSUE = 2


def person_edits_during_the_write(running: Running) -> None:
    fake = running.fake
    done: list[bool] = []

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PUT" and path == f"{ISSUES}/{ISSUE}" and not done:
            done.append(True)
            fake.advance(1)
            fake.assign(PROJECT, ISSUE, "dave", by="carol")
            issue = fake.issue(PROJECT, ISSUE)
            fake.set_labels(issue, [*issue.labels, "needs-docs"])

    fake.before_answer = hook


@pytest.mark.parametrize("webhook", ["late", "duplicated", "absent"])
async def test_a_persons_edit_during_a_claim_stands_with_its_webhook(
    running: Running, webhook: str
) -> None:
    fake = running.fake
    hosted = hosted_parts(running.endpoint)
    assert hosted is not None
    person_edits_during_the_write(running)
    client = Client(running.endpoint.service, running.endpoint.store)
    claimed = await client.claim(BUILDER, task_id(ISSUE))
    fake.before_answer = None
    assert claimed["status"] == "claimed"
    if webhook != "absent":
        payload = issue_hook_payload(fake, PROJECT, ISSUE, user="carol")
        key = str(uuid.uuid4())
        times = 2 if webhook == "duplicated" else 1
        answers = [
            (await running.deliver(payload, idempotency_key=key)).status_code for _ in range(times)
        ]
        assert answers == [202, 200][:times]
    else:
        await hosted.sync.poll_once()

    async def converged() -> bool:
        record = await running.record(ISSUE)
        return record["status"] == "claimed" and fake.issue(PROJECT, ISSUE).assignees != []

    await eventually(converged, within_s=5)
    issue = fake.issue(PROJECT, ISSUE)
    assert sorted(issue.assignees) == sorted([SEAT_USER, "dave"])
    assert set(issue.labels) >= {CLAIMED, "needs-docs"}
    record = await running.record(ISSUE)
    assert (record["status"], record["statusSource"]) == ("claimed", CLAIMED)
    assert record["binding"]["actor"] == BUILDER.actor
    writes = len(fake.writes)
    for _ in range(3):
        fake.advance(5)
        await hosted.sync.poll_once()
    assert len(fake.writes) == writes  # no write loop
    assert sorted(fake.issue(PROJECT, ISSUE).assignees) == sorted([SEAT_USER, "dave"])
