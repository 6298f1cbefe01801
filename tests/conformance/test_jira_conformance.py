"""Section 6 of the tasks endpoint contract against a Jira-backed endpoint, over the real
wire: a nats-server, the real bridge serving a ``provider = "jira"`` endpoint whose store
mirrors the fake Jira (served on loopback, its sync loop running), and callers speaking
the wire. Each check is the conformance runner's own (``section6.passes``), then what Jira
was made to hold is asserted where it says something of its own: a claim assigns the seat's
account and takes the issue In Progress; the positive path ends Done with the Done
resolution and the notes as comments.

The seat directory maps ``local.worker``, ``local.w`` and ``local.holder`` to Atlassian
accounts; the other callers have none, so their claims move the issue without assigning.
Check 9's broker half runs on a permissioned broker with a Jira bridge started under
exactly its ``--serve`` rows; what the operator's bind shows in Jira is the In Progress
status (``Tracker.labels_of`` reads the issue's status here: Jira claims by workflow).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance.test_section6 as section6
from cotal_tasks.bridge.config import EndpointConfig
from tests.conformance import hosted
from tests.conformance.conftest import SMALL_PAGE_CEILING
from tests.conformance.test_section6 import COMMIT_REF, RUN_REF
from tests.providers import hosted_support
from tests.providers.hosted_support import HostedMesh
from tests.providers.jira._support import TOKEN_ENV, jira_config
from tests.support.bridge import ENDPOINT
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT
from tests.support.fake_tracker import serve_on_loopback
from tests.support.trackers import Tracker

SEATS = {
    "712020:acct-worker": "local.worker",
    "712020:acct-w": "local.w",
    "712020:acct-holder": "local.holder",
}
ACCOUNT = {principal.split(".")[1]: account for account, principal in SEATS.items()}
Mesh = HostedMesh[FakeJira]
jira_mesh = hosted_support.mesh_opener(HostedMesh, jira_config)
CHECKS = [
    "01",
    "02",
    "03",
    "04",
    "05",
    "06",
    "07",
    "08",
    "09-operator",
    "10",
    "11",
    "13",
    "14",
    "15",
    "16",
    "17",
    "ep-v1",
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeJira:
    found = FakeJira()
    found.assignable |= set(SEATS)
    monkeypatch.setenv(TOKEN_ENV, found.token)
    return found


@pytest.fixture
async def api_url(fake: FakeJira) -> AsyncIterator[str]:
    async with serve_on_loopback(fake) as url:
        yield url


@pytest.fixture
async def mesh(tmp_path: Path, fake: FakeJira, api_url: str) -> AsyncIterator[Mesh]:
    async with jira_mesh(tmp_path, fake, api_url, seats=SEATS) as running:
        yield running


def titled(fake: FakeJira, title: str) -> Any:
    (issue,) = [i for i in fake.issues.values() if i.summary == title]
    return issue


def comments(issue: Any) -> list[str]:
    from cotal_tasks.providers.jira import adf

    return [adf.to_text(c.body) or "" for c in issue.comments]


def section(api_url: str) -> str:
    seats = "".join(f'"{account}" = "{who}"\n' for account, who in SEATS.items())
    return (
        f'provider = "jira"\n[endpoints.jira]\nproject = "{PROJECT}"\napi_url = "{api_url}"\n'
        f'email = "bridge@example.com"\ntoken_env = "{TOKEN_ENV}"\n'
        f"[endpoints.jira.seats]\n{seats}"
    )


JIRA = Tracker(
    provider="jira",
    section=section,
    endpoint=lambda api_url: EndpointConfig(
        name=ENDPOINT, settings=jira_config(api_url, seats=SEATS)
    ),
    labels_of=lambda fake, title: [titled(fake, title).status],
    claimed="In Progress",
)


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeJira, api_url: str
) -> None:
    await hosted.check_09_broker_refuses_self_only_bind_and_admits_the_operator(
        tmp_path, monkeypatch, JIRA, fake, api_url
    )


@pytest.mark.parametrize("check", CHECKS)
async def test_section6_check_holds_on_jira(mesh: Mesh, check: str) -> None:
    await section6.passes(mesh, check)


async def test_check_06_a_claim_assigns_and_moves_in_progress(mesh: Mesh) -> None:
    await section6.passes(mesh, "06")
    issue = titled(mesh.fake, "Claim me")
    assert (issue.assignee, issue.status, issue.labels) == (ACCOUNT["worker"], "In Progress", [])


async def test_check_12_list_limit_is_capped_at_ceiling(
    tmp_path: Path, fake: FakeJira, api_url: str
) -> None:
    async with jira_mesh(
        tmp_path, fake, api_url, seats=SEATS, page_ceiling=SMALL_PAGE_CEILING
    ) as small:
        await section6.passes(small, "12")
        assert len(fake.issues) == SMALL_PAGE_CEILING + 1


async def test_check_17_administer_unbind_returns_the_issue_to_to_do(mesh: Mesh) -> None:
    await section6.passes(mesh, "17")
    issue = titled(mesh.fake, "Seat is gone")
    assert (issue.assignee, issue.status) == (None, "To Do")
    assert comments(issue) == ["Seat is gone."]


async def test_checks_18_to_24_and_what_jira_shows(mesh: Mesh) -> None:
    run = await hosted.checks_18_to_24(mesh)
    issue = titled(mesh.fake, "Ship the parser")
    assert (issue.status, issue.resolution, issue.assignee) == ("Done", "Done", ACCOUNT["w"])
    assert comments(issue) == [
        f"Evidence:\n- run: {RUN_REF}",
        "Waiting on review.",
        f"Evidence:\n- commit: {COMMIT_REF}",
        "Merged.",
    ]
    statuses = [run.records[step]["statusSource"] for step in run.records]
    assert statuses == ["In Progress", "blocked", "blocked", "Done"]
    await hosted.echoes_change_nothing(mesh)


async def test_check_23_a_change_made_in_jira_is_announced(mesh: Mesh) -> None:
    title = "Edited on Jira"

    def change() -> None:
        mesh.fake.advance(61)
        mesh.fake.set_status(titled(mesh.fake, title), "Done", "Won't Do")

    record = await hosted.check_23_a_tracker_change_is_announced(mesh, title, change)
    assert (record["status"], record["statusSource"]) == ("dropped", "Done/Won't Do")


async def test_check_13_credential_shaped_text_in_jira_is_left_out(mesh: Mesh) -> None:
    await section6.passes(mesh, "13")

    def leak(title: str, body: str) -> str:
        mesh.fake.advance(61)
        return f"{PROJECT}#{mesh.fake.add_issue(PROJECT, title, body).number}"

    await hosted.check_13_import_filters_secrets(mesh, leak)
