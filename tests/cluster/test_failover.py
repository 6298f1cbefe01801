"""Failover on what a team that outgrows one machine runs: a NATS cluster.

On loopback: three clustered nats-server nodes (routes; the space's streams and buckets
at three replicas), one PostgreSQL, and two bridge processes connected to different
nodes, each serving a board endpoint and a GitHub endpoint over the fake GitHub. Twenty
callers create and claim tasks, retrying the same envelope id when an answer does not
come. Then bridge A (the GitHub endpoint's sync leader) is killed with SIGKILL, and
later the NATS node bridge B is connected to is stopped.

Shown: no acknowledged write lost, none applied twice (on the boards and on the fake
GitHub), the status-binding invariant on every task, ``changeSeq`` never decreasing for
any reader, every caller served again (seconds reported), ``board-changed`` after the
faults, and the GitHub sync leader failing over to bridge B.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.process.broker import free_port
from cotal_tasks.bridge.wire.space import ensure_space
from cotal_tasks.bridge.wire.subjects import event_filter
from cotal_tasks.core import TaskSummary, endpoint_token
from tests.cluster.conftest import SUMMARY
from tests.conftest import fresh_database, seat
from tests.support import polling
from tests.support.cluster import BridgeProcess, NatsCluster
from tests.support.cotal import TestCaller, nonce
from tests.support.fake_github import FakeGitHub, serve_fake_github
from tests.support.paging import follow_cursor, tasks_of

SPACE = "demo"
BOARD = "com.acme.tasks"
HOSTED = "com.acme.github"
REPO = "octo-org/hello-world"
TOKEN_ENV = "COTAL_TASKS_TEST_GITHUB_TOKEN"
HEALTH_TOKEN_ENV = "COTAL_TASKS_TEST_HEALTH_TOKEN"  # /healthz details (the sync role)
HEALTH_TOKEN = "health-" + "h" * 40
CALLERS = 20
WAIT_S = 2.0  # a caller's wait for an answer (and its deadlineMs)
POLL_S = 1.0  # the GitHub endpoint's poll interval
RETRYABLE = {"unavailable", "deadline-exceeded", "internal"}

Json = dict[str, Any]


@dataclass
class Tally:
    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # title -> (ep, taskId)
    claimed: dict[str, str] = field(default_factory=dict)  # taskId -> claimer principal
    served: list[tuple[float, int]] = field(default_factory=list)  # (time, caller)
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    retries: int = 0
    last: dict[str, str] = field(default_factory=dict)  # caller seat -> its last failure
    seqs: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(list))
    events: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))


async def call(caller: TestCaller, command: str, args: Json, request_id: str, **kw: Any) -> Any:
    """One request, bound to no instance (any instance of the queue group may answer)."""
    request_nonce = nonce()
    subject = caller.subject(command, request_nonce, **kw)
    body = caller.envelope(command, args=args, request_id=request_id, bind=False)
    body["deadlineMs"] = int(WAIT_S * 1000)
    try:
        got = await caller.exchange(subject, json.dumps(body).encode(), request_nonce, wait=WAIT_S)
    except Exception:  # the caller's node is going away: like no answer
        await asyncio.sleep(0.2)
        return None
    return None if got is None else got[1]


async def until_served(
    caller: TestCaller, command: str, args: Json, tally: Tally, give_up: float, **kw: Any
) -> Json | None:
    """Retry with the same envelope id until an answer that is not a transient failure."""
    request_id = secrets.token_urlsafe(9)
    while time.monotonic() < give_up:
        reply = await call(caller, command, args, request_id, **kw)
        if reply is not None and reply["ok"]:
            data: Json = reply["data"]
            return data
        if reply is not None and reply["error"]["code"] not in RETRYABLE:
            tally.refused[f"{command}:{reply['error']['code']}"] += 1
            return None
        tally.retries += 1
        tally.last[caller.seat.actor] = (
            f"{command}: " + ("no answer" if reply is None else json.dumps(reply["error"]))[:300]
        )
        await asyncio.sleep(0.05)
    return None


async def caller_loop(
    index: int, nc: NATS, tally: Tally, stopping: asyncio.Event, give_up: float
) -> None:
    endpoint = BOARD if index % 2 == 0 else HOSTED
    who = seat(f"caller{index}", index)
    caller = TestCaller(nc, SPACE, endpoint, who)
    await caller.describe()  # the contract digests; requests are bound to no instance
    n = 0
    while not stopping.is_set():
        title = f"c{index}-{n}"
        n += 1
        created = await until_served(caller, "create-task", {"title": title}, tally, give_up)
        if created is None:
            continue
        tally.acked[title] = (endpoint, created["taskId"])
        tally.served.append((time.monotonic(), index))
        args = {"taskId": created["taskId"]}
        claimed = await until_served(caller, "claim-task", args, tally, give_up, mode="self")
        if claimed is not None:
            tally.claimed[created["taskId"]] = who.principal
            tally.served.append((time.monotonic(), index))


async def reader_loop(nc: NATS, endpoint: str, tally: Tally, stopping: asyncio.Event) -> None:
    reader = TestCaller(nc, SPACE, endpoint, seat("reader", 99))
    await reader.describe()
    while not stopping.is_set():
        reply = await call(reader, "list-tasks", {"limit": 1}, secrets.token_urlsafe(9))
        if reply is not None and reply["ok"]:
            tally.seqs[endpoint].append(int(reply["data"]["changeSeq"]))
        await asyncio.sleep(0.1)


async def every_task(nc: NATS, endpoint: str) -> list[Json]:
    reader = TestCaller(nc, SPACE, endpoint, seat("auditor", 98))
    await reader.describe()

    async def fetch(args: Json) -> Json:
        reply = await call(reader, "list-tasks", args, secrets.token_urlsafe(9))
        assert reply is not None
        assert reply["ok"], reply
        page: Json = reply["data"]
        return page

    return tasks_of(await follow_cursor(fetch, {"limit": 100}))


def bridge_toml(
    data_dir: Path, url: str, port: int, board_db: str, mirror_db: str, api: str
) -> str:
    return f"""space = "{SPACE}"
owner = "local"
data_dir = "{data_dir}"
nats_url = "{url}"

[http]
port = {port}

[[http.tokens]]
token_env = "{HEALTH_TOKEN_ENV}"
principal = "local.ops"

[[endpoints]]
name = "{BOARD}"
database = "{board_db}"

[[endpoints]]
name = "{HOSTED}"
provider = "github"
database = "{mirror_db}"

[endpoints.github]
repository = "{REPO}"
api_url = "{api}"
token_env = "{TOKEN_ENV}"
poll_interval_s = {POLL_S}
mutation_spacing_s = 0.0
"""


@pytest.fixture
async def databases(postgres_url: str) -> AsyncIterator[tuple[str, str]]:
    async with fresh_database(postgres_url) as board, fresh_database(postgres_url) as mirror:
        yield board, mirror


async def eventually(probe: Any, what: str, within_s: float = 30.0) -> float:
    """``tests.support.polling.eventually``, its failure carrying the cluster's diagnosis."""
    try:
        return await polling.eventually(probe, within_s, what=what, every=0.1)
    except AssertionError as failed:
        raise AssertionError(f"{failed}; {DIAGNOSIS}") from None


def recovered_after(tally: Tally, fault_at: float, callers: int) -> float:
    """Seconds from the fault until every caller had a write acknowledged again."""
    first: dict[int, float] = {}
    for at, index in tally.served:
        if at > fault_at and index not in first:
            first[index] = at
    assert len(first) == callers, f"callers never served after the fault: {callers - len(first)}"
    return max(first.values()) - fault_at


async def test_failover_on_a_nats_cluster(
    tmp_path: Path, databases: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    board_db, mirror_db = databases
    fake = FakeGitHub()
    cluster = NatsCluster(tmp_path / "nats")
    bridges: list[BridgeProcess] = []
    tasks: list[asyncio.Task[None]] = []
    stopping = asyncio.Event()
    tally = Tally()
    await cluster.start()
    try:
        async with serve_fake_github(fake) as api:
            nc = await cluster.client([cluster.urls[2], cluster.urls[0], cluster.urls[1]])
            await ensure_space(nc.jetstream(), SPACE, replicas=3)
            env = {**os.environ, TOKEN_ENV: fake.token, HEALTH_TOKEN_ENV: HEALTH_TOKEN}
            for name, node in (("a", 0), ("b", 1)):
                port = free_port()
                config = tmp_path / f"{name}.toml"
                config.write_text(
                    bridge_toml(
                        tmp_path / name, nearest(cluster, node), port, board_db, mirror_db, api
                    ),
                    encoding="utf-8",
                )
                bridges.append(
                    BridgeProcess(
                        name, config, port, tmp_path / f"{name}.log", env, token=HEALTH_TOKEN
                    )
                )
            a, b = bridges
            await a.start()  # first, so it leads the GitHub endpoint's sync
            await eventually(lambda: _is(a, "leader"), "bridge A leads the GitHub sync", 60)
            await b.start()
            await eventually(lambda: _is(b, "follower"), "bridge B follows", 60)

            for endpoint in (BOARD, HOSTED):
                token = endpoint_token(endpoint)

                async def heard(msg: Msg, endpoint: str = endpoint) -> None:
                    tally.events[endpoint].append(time.monotonic())

                await nc.subscribe(event_filter(SPACE, token), cb=heard)
            give_up = time.monotonic() + 150
            tasks += [
                asyncio.create_task(caller_loop(i, nc, tally, stopping, give_up))
                for i in range(CALLERS)
            ]
            tasks += [
                asyncio.create_task(reader_loop(nc, ep, tally, stopping)) for ep in (BOARD, HOSTED)
            ]
            await asyncio.sleep(4)

            killed_at = time.monotonic()
            a.kill()  # SIGKILL: the GitHub sync leader, mid-load
            await eventually(lambda: _is(b, "leader"), "bridge B takes the GitHub sync", 30)
            takeover_s = time.monotonic() - killed_at
            await eventually(
                lambda: _all_served_since(tally, killed_at), "callers served again", 60
            )
            kill_recovery_s = recovered_after(tally, killed_at, CALLERS)

            node_stopped_at = time.monotonic()
            await cluster.nodes[1].stop()  # the node bridge B is connected to
            await eventually(
                lambda: _all_served_since(tally, node_stopped_at), "callers served again", 60
            )
            node_recovery_s = recovered_after(tally, node_stopped_at, CALLERS)
            await asyncio.sleep(2)
            stopping.set()
            await asyncio.gather(*tasks)

            board_tasks = await every_task(nc, BOARD)
            hosted_tasks = await every_task(nc, HOSTED)
            await nc.close()
    finally:
        stopping.set()
        for running in tasks:
            running.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for bridge in bridges:
            await bridge.stop()
        await cluster.stop()

    acked = {
        ep: {t: tid for t, (e, tid) in tally.acked.items() if e == ep} for ep in (BOARD, HOSTED)
    }
    lost = duplicated = 0
    for endpoint, held in ((BOARD, board_tasks), (HOSTED, hosted_tasks)):
        titles = collections.Counter(task["title"] for task in held)
        lost += sum(1 for title in acked[endpoint] if titles[title] == 0)
        duplicated += sum(count - 1 for count in titles.values() if count > 1)
        for task in held:  # the status-binding invariant, on every task
            TaskSummary.model_validate(task)
            if task["status"] in ("claimed", "blocked"):
                assert "binding" in task, task
            if task["status"] == "open":
                assert "binding" not in task, task
    on_github = collections.Counter(issue.title for issue in fake.repos[REPO].issues.values())
    duplicated_on_github = sum(count - 1 for count in on_github.values() if count > 1)
    lost_on_github = sum(1 for title in acked[HOSTED] if on_github[title] == 0)
    claims_lost = sum(
        1
        for task in (*board_tasks, *hosted_tasks)
        if task["taskId"] in tally.claimed and task["status"] != "claimed"
    )
    decreasing = {
        ep: sum(1 for x, y in itertools.pairwise(seqs) if y < x) for ep, seqs in tally.seqs.items()
    }
    events_after = {
        ep: sum(1 for at in times if at > node_stopped_at) for ep, times in tally.events.items()
    }
    summary = (
        f"cluster failover: writes acknowledged {len(tally.acked)} creates + "
        f"{len(tally.claimed)} claims, lost {lost + lost_on_github + claims_lost}, duplicated "
        f"{duplicated + duplicated_on_github}; retries {tally.retries}; callers served again "
        f"{kill_recovery_s:.1f} s after SIGKILL of bridge A, {node_recovery_s:.1f} s after "
        f"stopping a NATS node; GitHub sync leader failover {takeover_s:.1f} s; "
        f"board-changed after the faults {events_after}; refused {dict(tally.refused)}"
    )
    print("\n" + summary)
    SUMMARY.append(summary)
    assert tally.acked, "no write was acknowledged"
    assert (lost, lost_on_github, claims_lost) == (0, 0, 0), summary
    assert (duplicated, duplicated_on_github) == (0, 0), summary
    assert all(count == 0 for count in decreasing.values()), (decreasing, summary)
    assert all(events_after.get(ep, 0) > 0 for ep in (BOARD, HOSTED)), summary
    assert not tally.refused, summary


def nearest(cluster: NatsCluster, node: int) -> str:
    """Every node, this one first: the bridge connects to it and fails over to the rest."""
    urls = cluster.urls
    return ",".join([urls[node], *urls[:node], *urls[node + 1 :]])


async def _is(bridge: BridgeProcess, role: str) -> bool:
    return await bridge.role(HOSTED) == role


DIAGNOSIS: dict[str, Any] = {}


async def _all_served_since(tally: Tally, since: float) -> bool:
    served = {index for at, index in tally.served if at > since}
    DIAGNOSIS["unserved"] = {
        f"caller{i}": tally.last.get(f"caller{i}") for i in range(CALLERS) if i not in served
    }
    return len(served) == CALLERS
