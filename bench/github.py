"""What the GitHub sync costs, and how much of what GitHub links it finds, against the fake
GitHub served on loopback.

Requests are counted from the fake's request log and set beside their targets: an initial
import of N issues costs the list pages (GitHub's issues list also lists pull requests; each
page after the first reads its boundary issue again, so 1 + (listed - 100) / 99 of them)
plus one GraphQL request per page for the evidence of that page's issues and pull requests,
and nothing per issue; an unchanged poll costs one conditional request answered 304 (the
listing's last page), which GitHub's rate limit does not count: the issue events feed is
read on its own cadence (``github.cadence``). The polls run on the fake's clock, moved a
poll interval between them. After the import, links that move no ``updated_at`` are
planted and polled for: commits that reference issues without a pull request (found
through the issue events feed once its interval is over: polled for until then) and pull
requests of another repository (timeline-only: not found by polling with ``reference_sweep``
off, and reported as such; then found with it on, ``bench.github_sweep``, beside what the
sweep adds to a poll). Recall is the share of the links the fake's timelines hold (pull
requests of this and another repository, forks, Development links, commit references,
closing commits; most named by no pull request text) that became evidence.

Time is the import's walltime (from the poll's start to every issue committed, into a
fresh SQLite mirror) against the same fake serving from its own process
(``bench.github_remote``), beside a baseline measured in the same run: the very requests
the import made (method, path, query, body), replayed back to back by a bare ``httpx``
client that reads each answer as JSON, no mapping and no mirror. At ``issues`` the median
of ``rounds`` rounds, each import followed by its replay; at ``large`` one round, which
takes a few minutes. Then how soon an edit reaches a subscriber through a webhook
(``bench.github_webhook``); get-task beside the Cotal-shaped responder is the wire part's
figure (``bench.wire``), named here, not measured twice.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import github_webhook
from bench.figures import Seconds, Table
from bench.github_remote import remote_github, replay
from bench.github_sweep import SweepRun, sweep_polls
from bench.links import Link, score
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.core import MAX_EVIDENCE
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from cotal_tasks.providers.hosted.sync import SyncReport
from tests.support.fake_github import FakeGitHub, RecordedRequest, serve_fake_github
from tests.support.fake_github_model import Issue

REPO = "octo-org/bench"
OTHER = "octo-org/upstream"
FORK = "contributor/bench"
LIST_PATH = f"/repos/{REPO}/issues"
EVENTS_PATH = f"/repos/{REPO}/issues/events"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITHUB_TOKEN"
LINK_EVERY = 100  # one pull request linking one issue per this many issues
CHANGES = 10  # issues closed before the incremental poll
POLL_S = round(GitHubConfig.model_fields["poll_interval_s"].default)
FEED_S = round(GitHubConfig.model_fields["reference_events_interval_s"].default)


@dataclass
class Import:
    seconds: float
    report: SyncReport
    requests: list[RecordedRequest] = field(default_factory=list)
    evidence: dict[int, set[Link]] = field(default_factory=dict)


def build(issues: int) -> tuple[FakeGitHub, set[int]]:
    """The fake: ``issues`` issues (a tenth closed), one pull request per ``LINK_EVERY``
    of them closing one by its body, and on every other issue a link no pull request
    text of the repository names: a commit reference, a pull request of another
    repository, a Development link, a fork's pull request, or a closing commit. Returns
    it and the numbers the bodies link."""
    fake = FakeGitHub(repos=(REPO, OTHER, FORK))
    fake.bulk_issues(REPO, issues, closed_every=10)
    linked = set(range(LINK_EVERY // 2, issues + 1, LINK_EVERY))
    for number in sorted(linked):
        # Pull requests opened over time, as in a real repository: a full page of them
        # updated within one overlap window (5 s) would keep every poll a plain listing.
        fake.advance(60)
        fake.add_pull(REPO, f"Fix #{number}", head_ref=f"fix-{number}", closes=[number])
    for number in range(2, issues + 1, 2):
        fake.advance(1)
        kind = (number // 2) % 5
        if kind == 0:
            fake.add_commit_reference(REPO, number, f"{number:040x}")
        elif kind == 1:
            fake.add_pull(
                OTHER, f"Up {number}", "x", head_ref=f"up-{number}", references=[(REPO, number)]
            )
        elif kind == 2:
            pr = fake.add_pull(REPO, f"Work {number}", "No issue named", head_ref=f"w-{number}")
            fake.connect(REPO, number, int(pr["number"]))
        elif kind == 3:
            fake.add_pull(
                REPO,
                f"Fork {number}",
                "x",
                head_ref=f"f-{number}",
                head_repo=FORK,
                references=[(REPO, number)],
            )
        else:
            fake.close_issue(REPO, number, commit_id=f"{number:040x}")
    return fake, linked


def pull_links(fake: FakeGitHub, pr: Issue) -> set[Link]:
    assert pr.pull is not None
    head = pr.pull.head_repo or pr.repo
    branch = pr.pull.head_ref if head == REPO else f"{head}:{pr.pull.head_ref}"
    return {("review", f"{fake.html_url}/{pr.repo}/pull/{pr.number}"), ("branch", branch)}


def timeline_links(fake: FakeGitHub, issue: Issue) -> set[Link]:
    """What the fake's timeline links to ``issue``, named as the evidence names it (the
    newest ``MAX_EVIDENCE`` kept)."""
    found: list[tuple[int, Link]] = []
    for event in issue.timeline:
        at = event.created_at
        if event.kind in ("cross-referenced", "connected") and event.source is not None:
            source = fake.issue(*event.source)
            if source.pull is not None:
                found += [(at, link) for link in pull_links(fake, source)]
        elif event.kind == "referenced" and event.commit_id:
            where = event.commit_repo or issue.repo
            sha = event.commit_id if where == REPO else f"{where}@{event.commit_id}"
            found.append((at, ("commit", sha)))
        elif event.kind == "closed" and event.closer is not None:
            pr = fake.issue(*event.closer)
            found += [(at, link) for link in pull_links(fake, pr)]
            if pr.pull is not None and pr.pull.merge_commit_sha:
                found.append((at, ("commit", pr.pull.merge_commit_sha)))
        elif event.kind == "closed" and event.commit_id:
            found.append((at, ("commit", event.commit_id)))
    newest: dict[Link, int] = {}
    for at, link in found:
        newest[link] = max(at, newest.get(link, at))
    return set(sorted(newest, key=lambda link: newest[link])[-MAX_EVIDENCE:])


def endpoint(api_url: str, reference_sweep: bool = False) -> EndpointConfig:
    github = GitHubConfig(
        repository=REPO,
        api_url=api_url,
        token_env=TOKEN_ENV,
        mutation_spacing_s=0,
        max_retries=0,
        reference_sweep=reference_sweep,
    )
    return EndpointConfig(name="com.example.github", settings=github)


async def import_once(
    api_url: str, data_dir: Path, before: Callable[[], Awaitable[None]], fake: FakeGitHub | None
) -> Import:
    """One initial import into a fresh mirror under ``data_dir``, timed from the poll's
    start to its end (``before`` runs just ahead: the fake's log is cleared); with
    ``fake`` (served in this process), the requests it made and the evidence the mirror
    holds of each issue."""
    ep = endpoint(api_url)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    async with open_endpoint(config, ep, serve=True) as opened:
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        if fake is not None:
            hosted.http.clock_s = fake.clock.time  # the feed's cadence on the fake's clock
        await before()
        start = time.perf_counter()
        report = await hosted.sync.poll_once()
        run = Import(time.perf_counter() - start, report)
        if fake is None:
            return run
        run.requests = list(fake.requests)
        numbers = [n for n, i in fake.repos[REPO].issues.items() if i.pull is None]
        held = await hosted.store.mirror.get_many([f"{REPO}#{n}" for n in numbers])
        for number in numbers:
            stored = held.get(f"{REPO}#{number}")
            found = stored.task.evidence if stored is not None else ()
            run.evidence[number] = {(e.kind, e.ref) for e in found}
        return run


async def timed_imports(issues: int, rounds: int) -> tuple[Seconds, Seconds, int]:
    """``rounds`` imports of ``issues`` issues from the fake in its own process
    (``bench.github_remote``), each followed by the baseline: the requests it made,
    replayed back to back by a bare client. (import, replay, requests of an import)."""
    imports: list[float] = []
    replays: list[float] = []
    requests = 0
    async with remote_github(issues) as remote:
        os.environ[TOKEN_ENV] = remote.token
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(rounds):
                run = await import_once(remote.url, Path(tmp) / f"run{k}", remote.clear, None)
                assert run.report.issues == issues
                made = await remote.log()
                requests = len(made)
                imports.append(run.seconds)
                replays.append(await replay(remote.url, remote.token, made))
    return Seconds(tuple(imports)), Seconds(tuple(replays)), requests


@dataclass
class Poll:
    requests: list[RecordedRequest]
    report: SyncReport
    found: int = 0  # of the links planted before this poll, how many became evidence
    polls: int = 1  # polls it took (the commit references: until found, or a feed interval)
    waited_s: int = 0  # fake seconds from the links planted to the poll that found them


def plant(fake: FakeGitHub, step: str, changes: int) -> dict[int, Link]:
    """Before a poll: close ``changes`` open issues, or link ``changes`` of them in a way
    that moves no ``updated_at`` (a commit pushed without a pull request; a pull request
    of another repository). Returns the links planted, by issue."""
    fake.advance(POLL_S)
    issues = [i for i in fake.repos[REPO].issues.values() if i.pull is None]
    opened = [i for i in issues if i.state == "open"][:changes]
    planted: dict[int, Link] = {}
    for issue in opened if step != "unchanged" else ():
        number = issue.number
        if step == "changed":
            fake.close_issue(REPO, number)
        elif step == "committed":
            sha = f"c{number:039x}"
            fake.add_commit_reference(REPO, number, sha)
            planted[number] = ("commit", sha)
        elif step == "cross-referenced":
            branch, named = f"later-{number}", [(REPO, number)]
            pr = fake.add_pull(OTHER, f"Later {number}", "x", head_ref=branch, references=named)
            planted[number] = ("review", str(pr["html_url"]))
    return planted


async def polls_after(fake: FakeGitHub, api_url: str, data_dir: Path, changes: int) -> list[Poll]:
    """The next polls over an imported mirror: right after the import, unchanged, after
    ``changes`` open issues were closed, after commits referenced ``changes`` issues
    without a pull request (a poll every ``POLL_S`` until they are found, or the feed's
    interval and one poll have passed), and after pull requests of another repository
    referenced ``changes`` issues."""
    ep = endpoint(api_url)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    out: list[Poll] = []
    async with open_endpoint(config, ep, serve=True) as opened:
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        hosted.http.clock_s = fake.clock.time
        sync = hosted.sync
        for step in ("settle", "unchanged", "changed", "committed", "cross-referenced"):
            planted = plant(fake, step, changes) if step != "settle" else {}
            at = fake.clock.seconds
            fake.requests.clear()
            report = await sync.poll_once()
            poll = Poll(list(fake.requests), report, await _found(hosted, planted))
            while step == "committed" and poll.found < len(planted):
                if fake.clock.seconds - at >= FEED_S + POLL_S:
                    break  # past the documented bound: reported as missed
                fake.advance(POLL_S)
                fake.requests.clear()
                poll.report = await sync.poll_once()
                poll.requests += fake.requests
                poll.polls += 1
                poll.found = await _found(hosted, planted)
            poll.waited_s = fake.clock.seconds - at
            out.append(poll)
    return out


async def _found(hosted: Hosted, planted: dict[int, Link]) -> int:
    """Of the links ``planted``, how many are evidence in the mirror."""
    held = await hosted.store.mirror.get_many([f"{REPO}#{n}" for n in planted])
    return sum(
        1
        for number, link in planted.items()
        if (stored := held.get(f"{REPO}#{number}")) is not None
        and link in {(e.kind, e.ref) for e in stored.task.evidence}
    )


def row(name: str, value: str, target: str = "") -> str:
    return f"  {name:<48} {value:>12}   {target}".rstrip()


def _count(requests: list[RecordedRequest], keep: Callable[[RecordedRequest], bool]) -> int:
    return sum(1 for r in requests if keep(r))


def _is_list(r: RecordedRequest) -> bool:
    return r.matches("GET", LIST_PATH)


def recall(fake: FakeGitHub, run: Import) -> tuple[int, int, int]:
    """(links found, links the fake's timelines hold, evidence entries that are none)."""
    issues = fake.repos[REPO].issues
    return score(
        (timeline_links(fake, issue), run.evidence.get(number, set()))
        for number, issue in issues.items()
        if issue.pull is None
    )


async def main(issues: int = 10_000, rounds: int = 3, large: int = 50_000) -> None:
    """The import's requests, recall and the polls after it (the fake in this process),
    then the import's time at ``issues`` (``rounds`` rounds) and at ``large`` issues (one
    round; 0: not measured) against the fake in its own process."""
    fake, linked = build(issues)
    os.environ[TOKEN_ENV] = fake.token
    listed = len(fake.repos[REPO].issues)  # issues and pull requests

    async def clear() -> None:
        fake.requests.clear()

    async with serve_fake_github(fake) as api_url:
        with tempfile.TemporaryDirectory() as tmp:
            first = await import_once(api_url, Path(tmp) / "run0", clear, fake)
            assert first.report.issues == issues
            # Scored before the polls plant links the import could not have seen.
            found, expected, stray = recall(fake, first)
            polls = await polls_after(fake, api_url, Path(tmp) / "run0", CHANGES)
            swept = await sweep_polls(
                fake, REPO, OTHER, endpoint(api_url, True), Path(tmp) / "run0", CHANGES
            )

    lists = _count(first.requests, _is_list)
    graph = _count(first.requests, lambda r: r.matches("POST", "/graphql"))
    feed = _count(first.requests, lambda r: r.matches("GET", EVENTS_PATH))
    alone = len(first.requests) - lists - graph - feed
    print(
        f"\nGitHub sync against the fake GitHub on loopback (SQLite mirror), {issues:,} issues, "
        f"{listed - issues:,} pull requests ({len(linked)} naming an issue in their body), "
        f"links on every other issue that no pull request text names:"
    )
    pages = 1 + math.ceil(max(0, listed - 100) / 99)
    list_target = f"target {pages} = 1 + ceil(({listed:,} listed - 100) / 99)"
    print(row("initial import: list requests", f"{lists}", list_target))
    print(row("initial import: GraphQL evidence requests", f"{graph}", "target ~1 per list page"))
    print(row("initial import: issue events feed requests", f"{feed}", "target 1 (its mark)"))
    print(row("initial import: issues read one by one", f"{alone}", "target 0"))
    print(row("initial import: all requests", f"{len(first.requests)}"))
    share = f"{found / expected:.2%}" if expected else "n/a"
    recall_note = f"target >= 99% ({found:,} of {expected:,} timeline links)"
    print(row("evidence recall", share, recall_note))
    print(row("evidence naming no link of the fake", f"{stray}", "target 0"))
    settle, unchanged, changed, committed, crossed = polls
    read = changed.report.changed
    missed = "" if read == CHANGES else " - MISSED"
    for name, poll, note in (
        ("first poll after the import", settle, "conditional already: the import's last page"),
        (
            "unchanged poll",
            unchanged,
            "target 1 conditional request, 304: the listing (the issue events feed is read "
            f"on its cadence, every {FEED_S} s when nothing else asks it)",
        ),
        (
            f"poll after {CHANGES} issues closed",
            changed,
            f"{read} of {CHANGES} changes read{missed}; target 3: the listing's conditional "
            "request (its 200 is the walk's first page), 1 GraphQL, the issue events feed",
        ),
        (
            f"poll after {CHANGES} commits referenced issues",
            committed,
            f"{committed.found} of {CHANGES} commit links found in {committed.polls} poll(s), "
            f"{committed.waited_s} s after the commits, target <= {FEED_S} + {POLL_S} s (the "
            "feed's interval and a poll); no pull request, no updated_at change, no webhook",
        ),
        (
            f"poll after {CHANGES} other-repository pull requests",
            crossed,
            f"{crossed.found} of {CHANGES} links found; timeline-only, the sweep off",
        ),
    ):
        statuses = ", ".join(str(r.status) for r in poll.requests)
        print(row(name, f"{len(poll.requests)} request(s)", f"({statuses}; {note})"))
    print_sweep(swept, crossed.found)
    await print_import_time(issues, rounds, large)
    await github_webhook.main()
    print(
        "  get-task / the Cotal-shaped responder (50 callers): the wire part's figure "
        "(python -m bench wire), target >= 0.85"
    )


async def print_import_time(issues: int, rounds: int, large: int) -> None:
    """The import's walltime beside the same run's replay of the requests it made."""
    table = Table(
        "GitHub import time: from the poll's start to every issue committed (SQLite mirror), "
        "against the fake GitHub in its own process; the limit is the same requests replayed "
        "back to back by a bare client"
    )
    for size, times in ((issues, rounds), (large, 1)):
        if size <= 0:
            continue
        took, replayed, requests = await timed_imports(size, times)
        name = f"import of {size:,} issues ({requests} requests), {times} round(s)"
        table.seconds_at_most(name, took, replayed, 1.5)
        table.note(f"  import rate at {size:,} issues", f"{size / took.median:,.0f} issues/s")
    table.print()


def print_sweep(run: SweepRun, found_off: int) -> None:
    """The reference sweep's rows: what it finds against the same links polled without it."""
    lap = f"target ceil({run.open_issues:,} open issues / 100) = {run.bound}; records counts only"
    print(row("reference sweep on: polls of its first lap", f"{run.lap_polls}", lap))
    statuses = ", ".join(str(r.status) for r in run.unchanged)
    extra = _count(run.unchanged, lambda r: r.matches("POST", "/graphql"))
    note = f"({statuses}; target 1 conditional + 1 GraphQL: {extra} extra request per poll)"
    print(row("unchanged poll, reference sweep on", f"{len(run.unchanged)} request(s)", note))
    found = run.found_after[-1] if run.found_after else 0
    first = run.found_after[0] if run.found_after else 0
    polls = len(run.found_after)
    print(
        row(
            f"{CHANGES} other-repository pull requests, sweep on",
            f"{found}/{CHANGES} found",
            f"in {polls} poll(s), target <= {run.bound} ({first} after the first); "
            f"sweep off: {found_off}/{CHANGES}",
        )
    )
    print(
        row(
            "  requests of those polls",
            f"{run.requests}",
            f"{run.reads} issue(s) read again for a moved count",
        )
    )
