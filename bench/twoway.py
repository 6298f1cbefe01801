"""The two-way soak: seats write through the bridge while a simulated person edits the
same GitHub issues at random, for ``seconds`` (60 by default), against the fake GitHub on
loopback (each write in flight 50 to 400 ms, as GitHub's take) with the bridge's own sync
loop polling it (0.2 s) and webhooks waking it for half of the person's edits.

Printed at the end, after the writers stop and the mirror has settled:

- **lost updates** (must be 0): an issue whose title on GitHub is not the person's last
  (the bridge overwrote a person), whose mirror disagrees with GitHub (title or status,
  as the default rules read GitHub's state), or whose last change was a seat's
  successful write that GitHub no longer says (the write was dropped);
- **extra tracker writes**: writes to an issue outside every command to it (the bridge
  writing on its own: an echo loop), or the same write twice within one command, and
  the writes over three idle polls at the end (must be 0);
- **convergence**: for each of the person's renames, the time until the mirror showed it
  (median, p99), and the time after the last change until the whole mirror agreed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.core import ContractError, Seat
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from tests.bridge._support import Client, DictPresence
from tests.support.fake_github import FakeGitHub, serve_fake_github

REPO = "octo-org/twoway"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITHUB_TOKEN"
ISSUES = 12
SEATS = 3
HUMAN = "octocat"
POLL_S = 0.2
WRITE_LATENCY_S = (0.05, 0.4)  # each write to the fake is in flight this long


@dataclass
class Soak:
    fake: FakeGitHub
    ep: Endpoint
    client: Client
    rng: random.Random
    titles: dict[int, str] = field(default_factory=dict)  # the person's last title
    # issue -> (perf time, who, status) of each status change: who is "person" or "seat"
    changes: dict[int, list[tuple[float, float, str, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    windows: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)
    watchers: set[asyncio.Future[None]] = field(default_factory=set)
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    last_change: float = 0.0


def task_id(number: int) -> str:
    return f"{REPO}#{number}"


async def person(soak: Soak, stop: asyncio.Event) -> None:
    """Edits at random: renames (most), closes as completed or not planned, reopens."""
    fake, rng, n = soak.fake, soak.rng, 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(0.05, 0.25))
        number = rng.randint(1, ISSUES)
        issue = fake.issue(REPO, number)
        fake.advance(1)
        roll = rng.random()
        now = time.perf_counter()
        if roll < 0.7:
            n += 1
            title = f"Issue {number}, edit {n}"
            fake.set_title(issue, title, HUMAN)
            soak.titles[number] = title
            watcher = asyncio.ensure_future(watch(soak, number, title, now))
            soak.watchers.add(watcher)
            watcher.add_done_callback(soak.watchers.discard)
        elif roll < 0.85 and issue.state == "open":
            reason = rng.choice(["completed", "not_planned"])
            fake.close_issue(REPO, number, reason, by=HUMAN)
            soak.changes[number].append((now, now, "person", "closed"))
        elif issue.state == "closed":
            fake.set_state(issue, "open", None, HUMAN)
            soak.changes[number].append((now, now, "person", "open"))
        soak.last_change = time.perf_counter()
        if rng.random() < 0.5:  # a webhook for half of the edits
            hosted = Hosted.of(soak.ep.parts)
            sync = hosted.sync if hosted else None
            if sync is not None:
                sync.wake([number])


async def watch(soak: Soak, number: int, title: str, since: float) -> None:
    """How long until the mirror shows ``title`` (or a later title replaced it)."""
    while soak.titles.get(number) == title:
        with contextlib.suppress(ContractError):
            if (await soak.ep.store.get(task_id(number))).task.title == title:
                soak.latencies.append(time.perf_counter() - since)
                return
        await asyncio.sleep(0.01)


async def seat_loop(soak: Soak, who: Seat, stop: asyncio.Event) -> None:
    """Claims open issues, blocks and finishes its own, at random."""
    rng = soak.rng
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(0.05, 0.3))
        number = rng.randint(1, ISSUES)
        try:
            task = (await soak.ep.store.get(task_id(number))).task
        except ContractError:
            continue
        mine = task.binding is not None and task.binding.actor == who.actor
        if task.status == "open":
            command, args = "claim-task", {"taskId": task.taskId}
            status = "claimed"
        elif mine and task.status in ("claimed", "blocked"):
            status = rng.choice(["blocked", "done"] if task.status == "claimed" else ["done"])
            command, args = "update-task", {"taskId": task.taskId, "status": status}
        else:
            continue
        start = soak.fake.clock.seconds, len(soak.fake.requests)
        began = time.perf_counter()
        try:
            await soak.client.call(command, who, args, mode="self")
        except ContractError as exc:
            soak.outcomes[f"{exc.code.value} ({exc.outcome})"] += 1
            soak.windows[number].append((start[1], len(soak.fake.requests)))
            continue
        soak.outcomes["ok"] += 1
        soak.windows[number].append((start[1], len(soak.fake.requests)))
        soak.changes[number].append((began, time.perf_counter(), "seat", status))
        soak.last_change = time.perf_counter()


def tracker_status(fake: FakeGitHub, number: int, logins: set[str]) -> str:
    """What the default rules (with the invariant) make of the issue as GitHub holds it."""
    issue = fake.issue(REPO, number)
    if issue.state == "closed":
        return "dropped" if issue.state_reason in ("not_planned", "duplicate") else "done"
    seated = bool(set(issue.assignees) & logins)
    if "blocked" in issue.labels and seated:
        return "blocked"
    return "claimed" if seated else "open"


async def consistent(soak: Soak, logins: set[str]) -> list[str]:
    """The issues on which the mirror, GitHub and the last change disagree."""
    wrong = []
    for number in range(1, ISSUES + 1):
        issue = soak.fake.issue(REPO, number)
        record = (await soak.ep.store.get(task_id(number))).task
        status = tracker_status(soak.fake, number, logins)
        if number in soak.titles and issue.title != soak.titles[number]:
            wrong.append(f"#{number}: the person's title was overwritten")
        if record.title != issue.title or record.status != status:
            wrong.append(f"#{number}: the mirror says {record.status} {record.title!r}")
        seat_last = [c for c in soak.changes[number] if c[2] == "seat"]
        people = [c for c in soak.changes[number] if c[2] == "person"]
        if seat_last and not any(p[0] >= seat_last[-1][0] for p in people):
            written = seat_last[-1][3]
            if status != written and not (written == "claimed" and status == "blocked"):
                wrong.append(f"#{number}: the seat's {written} was dropped (GitHub: {status})")
    return wrong


def extra_writes(soak: Soak) -> int:
    """Writes outside every command to their issue, and writes repeated within one."""
    extra = 0
    inside: set[int] = set()
    for windows in soak.windows.values():
        for start, end in windows:
            seen: set[tuple[str, str, str]] = set()
            for index in range(start, end):
                request = soak.fake.requests[index]
                if request.is_write:
                    inside.add(index)
                    key = (request.method, request.path, repr(request.body))
                    extra += key in seen
                    seen.add(key)
    issue_writes = (
        i
        for i, r in enumerate(soak.fake.requests)
        if r.is_write and r.path.startswith(f"/repos/{REPO}/issues/")
    )
    # A write within another issue's command window is that issue's: only count those
    # outside every window.
    return extra + sum(1 for i in issue_writes if i not in inside)


async def soak_once(seconds: float, data_dir: Path) -> None:
    fake = FakeGitHub(repos=(REPO,), assignable=[f"seat-{k}" for k in range(SEATS)])
    latency = random.Random(7)
    fake.write_latency = lambda: latency.uniform(*WRITE_LATENCY_S)  # GitHub's writes take time
    os.environ[TOKEN_ENV] = fake.token
    for k in range(1, ISSUES + 1):
        fake.add_issue(REPO, f"Issue {k}")
    seats = [Seat("local", f"seat{k}", f"{k:026d}") for k in range(SEATS)]
    logins = {f"seat-{k}" for k in range(SEATS)}
    async with serve_fake_github(fake) as api_url:
        github = GitHubConfig(
            repository=REPO,
            api_url=api_url,
            token_env=TOKEN_ENV,
            mutation_spacing_s=0,
            reference_events=False,
            poll_interval_s=POLL_S,
            seats={f"seat-{k}": f"local.seat{k}" for k in range(SEATS)},
        )
        ep_config = EndpointConfig(
            name="com.example.twoway", settings=github, writes_per_minute_per_seat=0
        )
        config = BridgeConfig(
            space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep_config,)
        )
        presence = DictPresence()
        for who in seats:
            presence.put(who, environment=None)
        async with open_endpoint(config, ep_config, presence, serve=True) as ep:
            hosted = Hosted.of(ep.parts)
            assert hosted is not None
            sync = hosted.sync
            await sync.poll_once()
            soak = Soak(fake, ep, Client(ep.service, ep.store), random.Random(20))
            stop, polling = asyncio.Event(), asyncio.Event()
            loop = asyncio.ensure_future(sync.run(POLL_S, polling))
            writers = [asyncio.ensure_future(seat_loop(soak, w, stop)) for w in seats]
            writers.append(asyncio.ensure_future(person(soak, stop)))
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*writers)
            settled_at = None
            while time.perf_counter() - soak.last_change < 30:
                if not await consistent(soak, logins):
                    settled_at = time.perf_counter()
                    break
                await asyncio.sleep(0.02)
            if soak.watchers:  # the last renames' latencies
                await asyncio.wait(set(soak.watchers), timeout=30)
            for watcher in list(soak.watchers):
                watcher.cancel()
            polling.set()
            await loop
            mark = len(fake.requests)
            for _ in range(3):
                fake.advance(5)
                await sync.poll_once()
            idle = sum(1 for r in fake.requests[mark:] if r.is_write)
            wrong = await consistent(soak, logins)
    print_figures(soak, wrong, idle, settled_at, seconds)


def print_figures(
    soak: Soak, wrong: list[str], idle: int, settled_at: float | None, seconds: float
) -> None:
    print(f"\nTwo-way soak, {seconds:.0f} s: {SEATS} seats and a person on {ISSUES} issues")
    commands = ", ".join(f"{k} {v}" for k, v in sorted(soak.outcomes.items()))
    print(f"  seat commands: {commands}")
    renames = len(soak.latencies)
    print(f"  lost updates: {len(wrong)} (must be 0)")
    for line in wrong[:10]:
        print(f"    {line}")
    print(f"  extra tracker writes: {extra_writes(soak)}; over three idle polls: {idle}")
    if soak.latencies:
        ordered = sorted(soak.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(
            f"  convergence of {renames} renames: median {statistics.median(ordered):.2f} s, "
            f"p99 {p99:.2f} s"
        )
    after = "did not settle" if settled_at is None else f"{settled_at - soak.last_change:.2f} s"
    print(f"  after the last change, the whole mirror agreed in {after}")


async def main(seconds: float = 60.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await soak_once(seconds, Path(tmp))
