"""An endpoint over the repositories GitHub lists for it (``hosted.discovery``,
``github.discovery``): an organization's, picked by include/exclude globs, or a GitHub
App installation's; discovered again on a schedule, so a repository that joins is
synced without a restart, and one that leaves takes its tasks out of the scope (same
ids, dropped saying why) until it comes back with their history."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette

from cotal_tasks.bridge.http.api import describe_endpoint, discovered_sources
from cotal_tasks.bridge.http.webhooks import webhook_routes
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wiring.http import served_endpoint
from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.registry import provider
from tests.bridge._support import DictPresence
from tests.providers.github._support import (
    BUILDER,
    SEAT_LOGIN,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    GitHubEndpoint,
    open_github,
)
from tests.support.fake_github import (
    FakeGitHub,
    from_organization,
    installation_repositories_payload,
    issues_payload,
    repository_payload,
    signed_webhook,
)
from tests.support.polling import eventually

ORG = "acme"
DAY_S = 86_400
WEB_A, WEB_B, API, OLD = "acme/web-a", "acme/web-b", "acme/api", "acme/web-old"


def org(**settings: Any) -> dict[str, Any]:
    """The overrides of an endpoint over the organization's ``web-*`` repositories."""
    return {
        "repository": None,
        "organization": ORG,
        "include": ["web-*"],
        "route": WEB_A,
        **settings,
    }


def installation(**settings: Any) -> dict[str, Any]:
    return {"repository": None, "installation": True, "route": WEB_A, **settings}


@pytest.fixture
def fake() -> FakeGitHub:
    fake = FakeGitHub(repos=(WEB_A, WEB_B, API, OLD, "other/web-x"), assignable=[SEAT_LOGIN])
    fake.repos[OLD].archived = True
    for repo in fake.repos:
        fake.add_issue(repo, f"the first of {repo}")
    return fake


def task_ids(tasks: list[dict[str, Any]]) -> set[str]:
    return {task["taskId"] for task in tasks}


def paths(end: GitHubEndpoint) -> list[str]:
    return [source.path for source in end.hosted.sources]


def listings(fake: FakeGitHub, path: str) -> int:
    return len([r for r in fake.requests if r.method == "GET" and r.path == path])


async def test_an_organization_with_globs_mirrors_exactly_the_matching_repositories(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    for k in range(100):  # a second page of the organization's listing, none of them taken
        fake.add_repo(f"{ORG}/lib-{k:03}")
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **org()) as end:
        # Archived and unmatched repositories, and another owner's, are left out.
        assert paths(end) == [WEB_A, WEB_B]
        assert listings(fake, f"/orgs/{ORG}/repos") == 2  # both pages, by their Link
        await end.poll()
        assert task_ids(await end.all_tasks()) == {f"{WEB_A}#1", f"{WEB_B}#1"}
        keys = {source.sync.key for source in end.hosted.sources}
        assert keys == {f"github:{WEB_A}", f"github:{WEB_B}"}  # a checkpoint each
        state = await end.store.sync_state()
        assert state is not None
        assert [s.source for s in state.sources] == [f"organization {ORG}", WEB_A, WEB_B]
        created = await end.client.create("made by a seat")
        assert created["taskId"] == f"{WEB_A}#2"  # in the routed repository
        # The dashboard's source filter names the repositories the endpoint has now.
        described = await list_endpoints_of(end)
        assert described["sources"] == [WEB_A, WEB_B]


async def test_a_repository_created_later_joins_the_running_endpoint(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """The endpoint runs (``Hosted.run``: every source's loop and discovery); a
    repository created in the organization is synced at the next discovery, in its own
    loop, with its own checkpoint and state, and the loops all stop on ``stop``."""
    settings = org(discover_interval_s=0.2)
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end:
        stop = asyncio.Event()
        running = asyncio.create_task(end.hosted.run(stop))
        try:
            await eventually(lambda: _has(end, f"{WEB_B}#1"), 10, what="the first sync")
            fake.add_repo(f"{ORG}/web-c")
            fake.add_issue(f"{ORG}/web-c", "in a new repository")
            await eventually(lambda: _has(end, f"{ORG}/web-c#1"), 10, what="web-c synced")
            assert paths(end) == [WEB_A, WEB_B, f"{ORG}/web-c"]
            await eventually(lambda: _synced(end, f"{ORG}/web-c"), 10, what="its state")
        finally:
            stop.set()
            await asyncio.wait_for(running, 10)


async def test_a_source_loop_that_fails_unexpectedly_restarts_alone(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """An unexpected failure of one repository's loop (not the tracker's: a bug, its
    election's database) shows in its state and restarts that loop; the task group
    never cancels the other repositories' loops for it."""
    settings = org(discover_interval_s=0, poll_interval_s=0.1)
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end:
        broken = end.hosted.source(WEB_A).election
        run, failures = broken.run, list[int]()

        async def fails_once(stop: asyncio.Event) -> None:
            if not failures:
                failures.append(1)
                raise RuntimeError("a bug in one loop")
            await run(stop)

        broken.run = fails_once  # type: ignore[method-assign]
        stop = asyncio.Event()
        running = asyncio.create_task(end.hosted.run(stop))
        try:
            await eventually(lambda: _has(end, f"{WEB_B}#1"), 10, what="web-b synced")
            fake.add_issue(WEB_B, "after the other loop failed")
            await eventually(lambda: _has(end, f"{WEB_B}#2"), 10, what="web-b still syncing")
            await eventually(lambda: _has(end, f"{WEB_A}#1"), 10, what="web-a restarted")
            assert failures == [1]
            assert not running.done()
        finally:
            stop.set()
            await asyncio.wait_for(running, 10)


async def list_endpoints_of(end: GitHubEndpoint) -> dict[str, Any]:
    """What ``GET /v1/endpoints`` says of the endpoint."""
    served = served_endpoint(end.endpoint)
    return describe_endpoint("x", served.config, await discovered_sources(served))


async def _synced(end: GitHubEndpoint, source: str) -> bool:
    state = await end.store.sync_state()
    return state is not None and source in {s.source for s in state.sources if s.last_success_ms}


async def _has(end: GitHubEndpoint, task_id: str) -> bool:
    return task_id in task_ids(await end.all_tasks())


async def test_a_repository_leaving_the_installation_drops_its_tasks_until_it_returns(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence, mirror_url: str
) -> None:
    presence.put(BUILDER, environment=None)
    fake.installation = {WEB_A, WEB_B}
    fake.advance(-25 * DAY_S)  # closed 25 days ago: inside the horizon at the import
    fake.add_issue(WEB_B, "closed weeks ago")
    fake.close_issue(WEB_B, 2)
    fake.advance(25 * DAY_S)
    settings = installation(scope={"horizon_days": 30}, database=mirror_url)
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end:
        assert paths(end) == [WEB_A, WEB_B]
        await end.poll()
        task_id = f"{WEB_B}#1"
        await end.client.claim(BUILDER, task_id)

        fake.installation = {WEB_A}  # an admin took web-b out of the installation
        assert await end.hosted.discovering.rediscover()  # type: ignore[union-attr]
        assert paths(end) == [WEB_A]
        left = await end.client.get(task_id)
        assert (left["status"], left["statusSource"]) == (
            "dropped",
            f"out of scope: {WEB_B} left the installation",
        )
        assert left["binding"]["actor"] == BUILDER.actor  # the seat stays named
        error = await end.client.refused_update(
            ErrorCode.FAILED_PRECONDITION, BUILDER, task_id, status="done"
        )
        assert f"{WEB_B} left the installation" in error.message
        assert fake.issue(WEB_B, 1).state == "open"  # nothing written to it

        # Finished work stays finished: the closed issue's task stays done, its
        # statusSource saying why it is out, and a write to it is refused as well.
        closed = await end.client.get(f"{WEB_B}#2")
        assert (closed["status"], closed["statusSource"]) == (
            "done",
            f"out of scope: {WEB_B} left the installation",
        )

        fake.advance(5)
        fake.installation = {WEB_A, WEB_B}
        assert await end.hosted.discovering.rediscover()  # type: ignore[union-attr]
        # Ten days later, the closed issue is older than the horizon: the return reads it
        # all the same, as it reads every issue the source left behind.
        later = time.time() + 10 * DAY_S
        end.hosted.source(WEB_B).sync.clock = lambda: int(later * 1000)
        await end.poll()
        back = await end.client.get(task_id)
        assert (back["status"], back["statusSource"]) == ("claimed", "in-progress")
        history = [entry.status for entry in await end.store.history(task_id)]
        assert history == ["open", "claimed", "dropped", "claimed"]
        assert (await end.client.get(f"{WEB_B}#2"))["status"] == "done"


async def test_a_left_repository_is_known_after_a_restart(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """A repository that leaves while the bridge is down leaves at the next start."""
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **org()) as end:
        await end.poll()
    fake.repos[WEB_B].archived = True
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **org()) as end:
        assert paths(end) == [WEB_A]
        left = await end.client.get(f"{WEB_B}#1")
        assert (left["status"], left["statusSource"]) == (
            "dropped",
            f"out of scope: {WEB_B} archived",
        )


async def test_a_repository_a_listing_skips_stays_until_github_says_it_is_gone(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **org()) as end:
        await end.poll()
        fake.unlisted = {WEB_B}  # the listing shifted under its pages
        assert await end.hosted.discovering.rediscover()  # type: ignore[union-attr]
        assert paths(end) == [WEB_A, WEB_B]
        assert (await end.client.get(f"{WEB_B}#1"))["status"] == "open"
        assert listings(fake, f"/repos/{WEB_B}") == 1  # asked for by name
        fake.fail_next(1, status=301, message="Moved Permanently", path=f"/repos/{WEB_B}")
        assert await end.hosted.discovering.rediscover()  # type: ignore[union-attr]
        assert paths(end) == [WEB_A]  # renamed: GitHub answers 301 under the old name
        left = await end.client.get(f"{WEB_B}#1")
        assert left["statusSource"] == f"out of scope: {WEB_B} renamed or moved"


async def test_one_repository_answering_404_and_a_failing_discovery_leave_the_rest_syncing(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    fake.fail_next(1000, status=404, message="Not Found", path=f"/repos/{WEB_B}/*")
    settings = org(max_retries=0)  # the discovery's 502 below is not waited out
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end:
        report = await end.hosted.catch_up()
        assert any(line.startswith(f"{WEB_B}: failed") for line in report.lines)
        assert any(line.startswith(f"{WEB_A}: synced") for line in report.lines)
        assert task_ids(await end.all_tasks()) == {f"{WEB_A}#1"}

        fake.fail_next(1000, status=502, path=f"/orgs/{ORG}/repos")
        assert not await end.hosted.discovering.rediscover()  # type: ignore[union-attr]
        assert paths(end) == [WEB_A, WEB_B]  # the known sources stay
        fake.add_issue(WEB_A, "still synced")
        await end.hosted.source(WEB_A).sync.poll_once()
        assert f"{WEB_A}#2" in task_ids(await end.all_tasks())
        state = await end.store.sync_state()
        assert state is not None
        assert not state.refused  # ready on web-a
        by_source = {s.source: s for s in state.sources}
        assert by_source[f"organization {ORG}"].failing is not None
        assert by_source[WEB_B].refused
        stale = await end.store.freshness()
        assert stale is not None
        assert stale.reason.startswith(f"GitHub sync is failing: organization {ORG}: ")


@asynccontextmanager
async def running(end: GitHubEndpoint) -> AsyncIterator[httpx.AsyncClient]:
    """The endpoint's loops running (``Hosted.run``, as the bridge runs it), and a client
    of the webhook route over its receivers, as the bridge serves it."""
    stop = asyncio.Event()
    loops = asyncio.create_task(end.hosted.run(stop))
    app = Starlette(routes=webhook_routes([("github", end.endpoint.webhooks)]))
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as http:
            await eventually(lambda: _synced(end, WEB_B), 10, what="the first sync")
            yield http
    finally:
        stop.set()
        await asyncio.wait_for(loops, 10)


async def deliver(
    http: httpx.AsyncClient, event: str, payload: dict[str, Any], delivery: str | None = None
) -> httpx.Response:
    body, headers = signed_webhook(WEBHOOK_SECRET, event, payload, delivery=delivery)
    return await http.post("/webhooks/github", content=body, headers=headers)


async def test_an_organization_webhook_reaches_the_source_it_names_and_rediscovers(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    presence: DictPresence,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    settings = org(webhook_secret_env=SECRET_ENV)
    async with (
        open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end,
        running(end) as http,
    ):
        # An issue of a repository the endpoint reads: that source, that issue, only.
        fake.advance(5)
        fake.set_title(fake.issue(WEB_B, 1), "renamed by a person", "octocat")
        mark = len(fake.requests)
        hook = from_organization(fake, issues_payload(fake, "edited", WEB_B, 1))
        assert (await deliver(http, "issues", hook)).status_code == 202

        async def retitled() -> bool:
            return bool((await end.client.get(f"{WEB_B}#1"))["title"] == "renamed by a person")

        await eventually(retitled, 10, what="the named issue refreshed")
        asked = {r.path for r in fake.requests[mark:] if "graphql" not in r.path}
        assert asked == {f"/repos/{WEB_B}/issues/1"}

        # The organization's other repositories are ignored; another owner's is not ours.
        other = from_organization(fake, issues_payload(fake, "edited", API, 1))
        ignored = await deliver(http, "issues", other)
        assert (ignored.status_code, ignored.json()["message"].split(";")[0]) == (200, "ignored")
        stranger = issues_payload(fake, "edited", "other/web-x", 1)
        assert (await deliver(http, "issues", stranger)).status_code == 404

        # A repository created: discovered at once (the schedule is 600 s away).
        fake.add_repo(f"{ORG}/web-c")
        fake.add_issue(f"{ORG}/web-c", "in a new repository")
        created = repository_payload(fake, "created", f"{ORG}/web-c")
        assert (await deliver(http, "repository", created, "d-1")).status_code == 202
        await eventually(lambda: _has(end, f"{ORG}/web-c#1"), 10, what="web-c synced")
        again = await deliver(http, "repository", created, "d-1")
        assert (again.status_code, again.json()["message"]) == (200, "delivery already received")


async def test_a_repository_removed_from_the_installation_leaves_at_its_webhook(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    presence: DictPresence,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    fake.installation = {WEB_A, WEB_B}
    settings = installation(webhook_secret_env=SECRET_ENV)
    async with (
        open_github(fake, github_url, tmp_path / "b", presence=presence, **settings) as end,
        running(end) as http,
    ):
        fake.installation = {WEB_A}
        removed = installation_repositories_payload(fake, "removed", removed=(WEB_B,))
        assert (await deliver(http, "installation_repositories", removed)).status_code == 202

        async def dropped() -> bool:
            task = await end.client.get(f"{WEB_B}#1")
            return bool(task["statusSource"] == f"out of scope: {WEB_B} left the installation")

        await eventually(dropped, 10, what="web-b's task out of the scope")
        assert paths(end) == [WEB_A]
        assert end.endpoint.webhooks[-1].path != WEB_B  # its receiver left with it


async def test_the_preview_shows_the_repositories_discovery_lists_now(
    fake: FakeGitHub, github_url: str
) -> None:
    settings = GitHubConfig.model_validate({**org(), "api_url": github_url, "token_env": TOKEN_ENV})
    show = provider("github").preview
    assert show is not None
    shown = {task.taskId for _, task in await show(settings, "demo", 5)}
    assert shown == {f"{WEB_A}#1", f"{WEB_B}#1"}
    said = "those organization acme lists (names web-*; archived ones skipped; listed every 600 s)"
    assert any(said in line for line in provider("github").describe(settings))


def test_a_source_that_left_loses_its_gauges() -> None:
    metrics = Metrics()
    for source in (f"organization {ORG}", WEB_A, WEB_B):
        metrics.source_state("ep", source, failing=False, refused=False, last_success_ms=1000)
    metrics.sources_now("ep", {f"organization {ORG}", WEB_A})
    shown = metrics.render().decode()
    assert f'source="{WEB_A}"' in shown
    assert f'source="{WEB_B}"' not in shown


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"organization": ORG, "repositories": [WEB_A], "route": WEB_A}, "Keep one"),
        ({"organization": ORG, "installation": True, "route": WEB_A}, "Keep one"),
        ({"organization": ORG}, "Set route"),
        ({"organization": ORG, "route": "other/web-x"}, "not a repository the organization"),
        ({"organization": ORG, "include": ["acme/web-*"], "route": WEB_A}, "without its owner"),
        ({"repository": WEB_A, "include": ["web-*"]}, "Set organization"),
    ],
)
def test_an_organization_setting_that_cannot_work_is_refused_naming_the_remedy(
    settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        GitHubConfig.model_validate(settings)
