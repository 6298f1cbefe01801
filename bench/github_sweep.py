"""The GitHub bench's reference sweep figures (``reference_sweep``): pull requests of another
repository that reference open issues, found with the sweep on, against the same mirror
polled with it off (``bench.github``, 0 found); and what the sweep adds to a poll.

The sweep is turned on over the imported mirror, as over a running one: its first lap
(ceil(open issues / 100) polls) only records the link counts. Then pull requests of another
repository reference open issues spread over the whole range (so the cursor must wrap to
reach them all), and polls go on until every link is evidence or a lap has passed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.providers.github import sweep
from cotal_tasks.providers.hosted.assemble import Hosted
from tests.support.fake_github import FakeGitHub, RecordedRequest


@dataclass
class SweepRun:
    open_issues: int
    lap_polls: int = 0  # polls the first lap took
    unchanged: list[RecordedRequest] = field(default_factory=list)  # one unchanged poll
    found_after: list[int] = field(default_factory=list)  # links found after each poll
    requests: int = 0  # requests of the polls that found them
    reads: int = 0  # issues read again for a moved count

    @property
    def bound(self) -> int:
        return max(1, math.ceil(self.open_issues / sweep.PAGE))


async def sweep_polls(
    fake: FakeGitHub,
    repo: str,
    other: str,
    ep: EndpointConfig,
    data_dir: Path,
    changes: int,
) -> SweepRun:
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    issues = [i for i in fake.repos[repo].issues.values() if i.pull is None]
    opened = sorted(i.number for i in issues if i.state == "open")
    run = SweepRun(len(opened))
    async with open_endpoint(config, ep, serve=True) as opened_ep:
        hosted = Hosted.of(opened_ep.parts)
        assert hosted is not None
        sync = hosted.sync
        for _ in range(run.bound + 1):
            fake.advance(60)
            await sync.poll_once()
            run.lap_polls += 1
            if sweep.SweepState.load((await sync.checkpoint()).get(sweep.SWEEP)).lap > 0:
                break
        fake.advance(60)
        fake.requests.clear()
        await sync.poll_once()
        run.unchanged = list(fake.requests)
        stride = max(1, len(opened) // changes)
        planted: dict[int, str] = {}
        for number in opened[::stride][:changes]:
            fake.advance(1)
            pr = fake.add_pull(
                other, f"Swept {number}", "x", head_ref=f"s-{number}", references=[(repo, number)]
            )
            planted[number] = str(pr["html_url"])
        fake.requests.clear()
        mirror = hosted.store.mirror
        for _ in range(run.bound):
            fake.advance(60)
            report = await sync.poll_once()
            run.reads += report.fetched
            held = await mirror.get_many([f"{repo}#{n}" for n in planted])
            found = sum(
                1
                for number, url in planted.items()
                if (stored := held.get(f"{repo}#{number}")) is not None
                and url in {e.ref for e in stored.task.evidence}
            )
            run.found_after.append(found)
            if found == len(planted):
                break
        run.requests = len(fake.requests)
    return run
