"""``POST /webhooks/github`` on the HTTP listener of a running bridge (a real broker, the
bridge's own sync loop with a 60 s poll interval): signatures, delivery dedup, and the
wake that refreshes the named issue long before the next poll."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cotal_tasks.providers.github.webhook import signature_valid
from cotal_tasks.providers.hosted.tracker import TrackedIssue
from tests.bridge._support import Client
from tests.providers.github._support import (
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    GitHubMesh,
    fetched_issue_numbers,
    github_mesh,
    list_requests,
    task_id,
)
from tests.providers.hosted_support import add_issues
from tests.support.bridge import ENDPOINT
from tests.support.fake_github import (
    TEST_VECTOR_PAYLOAD,
    TEST_VECTOR_SECRET,
    TEST_VECTOR_SIGNATURE,
    FakeGitHub,
    issues_payload,
    ping_payload,
    pull_request_payload,
    sign,
    signed_webhook,
)
from tests.support.polling import eventually

Json = dict[str, object]


def test_githubs_published_test_vector() -> None:
    secret = TEST_VECTOR_SECRET.encode()
    assert signature_valid(secret, TEST_VECTOR_PAYLOAD, TEST_VECTOR_SIGNATURE)
    assert not signature_valid(secret, b"Hello, World?", TEST_VECTOR_SIGNATURE)
    assert not signature_valid(
        b"It's a secret to everybody", TEST_VECTOR_PAYLOAD, TEST_VECTOR_SIGNATURE
    )
    assert not signature_valid(secret, TEST_VECTOR_PAYLOAD, TEST_VECTOR_SIGNATURE.upper())
    assert not signature_valid(secret, TEST_VECTOR_PAYLOAD, TEST_VECTOR_SIGNATURE[:-1])
    assert not signature_valid(
        secret, TEST_VECTOR_PAYLOAD, TEST_VECTOR_SIGNATURE.removeprefix("sha256=")
    )
    assert not signature_valid(secret, TEST_VECTOR_PAYLOAD, None)
    assert not signature_valid(secret, TEST_VECTOR_PAYLOAD, "")
    sha1 = signed_webhook(TEST_VECTOR_SECRET, "ping", TEST_VECTOR_PAYLOAD)[1]["X-Hub-Signature"]
    assert not signature_valid(secret, TEST_VECTOR_PAYLOAD, sha1)  # only sha256 counts
    assert sign(TEST_VECTOR_SECRET, TEST_VECTOR_PAYLOAD) == TEST_VECTOR_SIGNATURE


@pytest.fixture
async def hooked(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[GitHubMesh]:
    """A running bridge syncing five issues, with its webhook secret set."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    add_issues(fake, REPO, 5, spacing_s=10)
    async with github_mesh(tmp_path, fake, github_url, webhook_secret_env=SECRET_ENV) as mesh:
        assert mesh.bridge.http_url is not None
        yield mesh


async def deliver(
    mesh: GitHubMesh,
    event: str,
    payload: Json | bytes,
    *,
    delivery: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> httpx.Response:
    signed_body, signed_headers = signed_webhook(WEBHOOK_SECRET, event, payload, delivery=delivery)
    async with httpx.AsyncClient(base_url=str(mesh.bridge.http_url)) as http:
        return await http.post(
            "/webhooks/github",
            content=signed_body if body is None else body,
            headers={**signed_headers, **(headers or {})},
        )


def client_of(mesh: GitHubMesh) -> Client:
    return Client(mesh.endpoint.service, mesh.endpoint.store)


async def status_of(mesh: GitHubMesh, number: int) -> str:
    return str((await client_of(mesh).get(task_id(number)))["status"])


async def reaches(mesh: GitHubMesh, number: int, status: str, within_s: float = 5.0) -> float:
    """Waits until issue ``number``'s task has ``status``; the seconds it took."""

    async def there() -> bool:
        return await status_of(mesh, number) == status

    return await eventually(there, within_s, what=f"issue {number}'s task {status}")


async def delivered(mesh: GitHubMesh, number: int) -> None:
    """The ``issues`` delivery of issue ``number``'s close is taken (202)."""
    payload = issues_payload(mesh.fake, "closed", REPO, number)
    assert (await deliver(mesh, "issues", payload)).status_code == 202


async def test_a_signed_delivery_refreshes_the_named_issue_quickly(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.close_issue(REPO, 2)
    mark = len(fake.requests)

    answer = await deliver(hooked, "issues", issues_payload(fake, "closed", REPO, 2))

    assert answer.status_code == 202
    assert answer.json() == {"message": "accepted; 1 issue(s) to refresh"}

    took = await reaches(hooked, 2, "done", within_s=5)
    assert took < 5 < hooked.hosted.tracker_config.poll_interval_s
    assert fetched_issue_numbers(fake, mark) == [2]
    assert list_requests(fake, mark) == []  # a refresh, not a poll


async def test_a_tampered_body_is_refused_and_changes_nothing(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.close_issue(REPO, 2)
    payload = issues_payload(fake, "closed", REPO, 2)
    body, _ = signed_webhook(WEBHOOK_SECRET, "issues", payload)
    tampered = body.replace(b'"number": 2', b'"number": 3')
    assert tampered != body
    seq, mark = await hooked.endpoint.store.change_seq(), len(fake.requests)

    answer = await deliver(hooked, "issues", payload, delivery="d-tampered", body=tampered)
    unsigned = await deliver(
        hooked, "issues", payload, delivery="d-unsigned", headers={"X-Hub-Signature-256": ""}
    )

    assert (answer.status_code, unsigned.status_code) == (401, 401)
    assert answer.json()["message"].startswith("the X-Hub-Signature-256 signature does not match. ")
    # Prove the bridge is past any refresh the refused deliveries could have caused: a
    # good delivery for #4 is refreshed, and #2 and #3 were never read.
    fake.close_issue(REPO, 4)
    await delivered(hooked, 4)
    await reaches(hooked, 4, "done")
    assert fetched_issue_numbers(fake, mark) == [4]
    assert await status_of(hooked, 2) == "open"
    assert await hooked.endpoint.store.change_seq() == seq + 1
    # The refused delivery id was not recorded: the genuine delivery under it is taken.
    genuine = await deliver(hooked, "issues", payload, delivery="d-tampered")
    assert genuine.status_code == 202


async def test_a_redelivery_is_acknowledged_and_not_refreshed_again(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.close_issue(REPO, 2)
    payload = issues_payload(fake, "closed", REPO, 2)
    mark = len(fake.requests)
    first = await deliver(
        hooked, "issues", payload, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958"
    )
    assert first.status_code == 202

    await reaches(hooked, 2, "done")
    again = await deliver(
        hooked, "issues", payload, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958"
    )
    assert again.status_code == 200
    assert again.json() == {"message": "delivery already received"}
    # A replay of a delivery this process recorded is answered before its body is read
    # (a flood's cheapest shape): signed text that is not JSON under the same id is
    # taken for the replay it claims to be (before: 400), under a new id it is refused.
    replayed = await deliver(
        hooked, "issues", b"{not json", delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958"
    )
    assert (replayed.status_code, replayed.json()) == (200, again.json())
    assert (await deliver(hooked, "issues", b"{not json")).status_code == 400
    # A later delivery for #3 is refreshed; #2 is still fetched once only.
    fake.close_issue(REPO, 3, "not_planned")
    await delivered(hooked, 3)
    await reaches(hooked, 3, "dropped")
    assert fetched_issue_numbers(fake, mark) == [2, 3]


async def test_a_pull_request_delivery_brings_its_evidence(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    pr = fake.add_pull(REPO, "Fix four", head_ref="fix-four", closes=[4])
    answer = await deliver(
        hooked, "pull_request", pull_request_payload(fake, "opened", REPO, int(str(pr["number"])))
    )
    assert answer.status_code == 202

    async def has_evidence() -> bool:
        record = await client_of(hooked).get(task_id(4))
        return bool(record["evidence"])

    await eventually(has_evidence)
    record = await client_of(hooked).get(task_id(4))
    assert {(e["kind"], e["ref"]) for e in record["evidence"]} == {
        ("review", str(pr["html_url"])),
        ("branch", "fix-four"),
    }


async def test_a_closing_commit_arrives_as_evidence_with_the_close(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    sha = "e5bd3914e2e596debea16f433f57875b5b90bcd6"
    fake.close_issue(REPO, 5, commit_id=sha)
    await delivered(hooked, 5)
    await reaches(hooked, 5, "done")
    record = await client_of(hooked).get(task_id(5))
    assert [(e["kind"], e["ref"]) for e in record["evidence"]] == [("commit", sha)]


async def test_deliveries_it_cannot_use(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    ping = await deliver(hooked, "ping", ping_payload(fake, REPO))
    assert (ping.status_code, ping.json()["message"]) == (202, "accepted; 0 issue(s) to refresh")
    elsewhere = issues_payload(fake, "opened", REPO, 1)
    elsewhere["repository"] = {
        **dict(elsewhere["repository"]),
        "full_name": "octo-org/other",
        "id": 987_654_321,
    }
    assert (await deliver(hooked, "issues", elsewhere)).status_code == 404
    no_id = await deliver(
        hooked, "issues", issues_payload(fake, "opened", REPO, 1), headers={"X-GitHub-Delivery": ""}
    )
    assert no_id.status_code == 400
    not_json = await deliver(hooked, "issues", b"{not json")
    assert not_json.status_code == 400


async def test_a_delivery_during_a_refresh_is_not_left_for_the_next_poll(
    hooked: GitHubMesh,
) -> None:
    fake = hooked.fake
    tracker = hooked.hosted.tracker
    fetch = tracker.fetch
    gate = asyncio.Event()
    fetched: list[int] = []

    async def slow_fetch(number: int) -> TrackedIssue | None:
        fetched.append(number)
        if number == 2:
            await gate.wait()  # the refresh of #2 is in flight...
        return await fetch(number)

    tracker.fetch = slow_fetch  # type: ignore[method-assign]
    fake.close_issue(REPO, 2)
    fake.close_issue(REPO, 3)
    await delivered(hooked, 2)

    async def two_in_flight() -> bool:
        return 2 in fetched

    await eventually(two_in_flight)
    await delivered(hooked, 3)  # ...when the delivery for #3 arrives.
    gate.set()

    await reaches(hooked, 3, "done", within_s=2)  # actual: only after the 60 s poll interval


async def test_an_organisations_ping_is_answered(hooked: GitHubMesh) -> None:
    """An organisation's hook sends its ``ping`` with no ``repository``: 200, not 404.
    The payload is GitHub's own example (``tests/fixtures/github``)."""
    fixture = Path(__file__).parents[2] / "fixtures/github/webhook-ping-organization.json"
    ping = fixture.read_bytes()

    answer = await deliver(hooked, "ping", ping)

    assert (answer.status_code, answer.json()) == (200, {"message": "pong"})
    forged = await deliver(hooked, "ping", ping, headers={"X-Hub-Signature-256": "sha256=00"})
    assert forged.status_code == 401


async def test_a_renamed_repository_keeps_its_deliveries(hooked: GitHubMesh) -> None:
    """The first delivery teaches the repository's stable id; after a rename (a new
    ``full_name``, the same ``id``) deliveries still reach the endpoint."""
    fake = hooked.fake
    assert (await deliver(hooked, "issues", issues_payload(fake, "opened", REPO, 1))).status_code
    fake.close_issue(REPO, 3)
    renamed = issues_payload(fake, "closed", REPO, 3)
    renamed["repository"] = {**dict(renamed["repository"]), "full_name": "octo-org/hello-2"}

    answer = await deliver(hooked, "issues", renamed)

    assert answer.status_code == 202  # before: 404
    await reaches(hooked, 3, "done")


async def test_an_issue_from_before_2013_is_an_issue_in_a_delivery(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.close_issue(REPO, 4)
    payload = issues_payload(fake, "closed", REPO, 4)
    legacy = {"html_url": None, "diff_url": None, "patch_url": None}
    payload["issue"] = {**dict(payload["issue"]), "pull_request": legacy}

    answer = await deliver(hooked, "issues", payload)

    assert answer.json() == {"message": "accepted; 1 issue(s) to refresh"}  # before: 0


async def test_degradations_show_in_metrics_and_not_to_a_tokenless_healthz(
    hooked: GitHubMesh,
) -> None:
    fake = hooked.fake
    fake.add_pull(REPO, "Refresh tokens", head_ref="fix/token=refresh", closes=[2])
    payload = pull_request_payload(fake, "opened", REPO, 6)
    assert (await deliver(hooked, "pull_request", payload)).status_code == 202

    async def refused() -> bool:
        return bool(hooked.hosted.store.degradations()["counts"])

    await eventually(refused)
    async with httpx.AsyncClient(base_url=str(hooked.bridge.http_url)) as http:
        tokenless = (await http.get("/healthz")).json()  # ready or not, no details
        metrics = (await http.get("/metrics")).text
    assert tokenless["endpoints"] == {ENDPOINT: {"ready": True}}
    degraded = hooked.hosted.store.degradations()  # what /healthz shows a token holder
    assert degraded["counts"] == {"evidence-refused": 1}
    assert degraded["recent"][0]["item"] == task_id(2)
    assert "fix/token=refresh" not in str(degraded)
    assert 'cotal_tasks_sync_degraded_items_total{endpoint="' in metrics
    line = next(x for x in metrics.splitlines() if 'reason="evidence-refused"' in x)
    assert line.endswith(" 1.0")
