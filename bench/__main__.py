"""``make bench``: every figure of the performance targets beside its limit, in one run.

Each figure is the median of several rounds with the spread of the rounds, beside the
physical limit it is compared with, measured in the same run on the same machine: the
database's own driver on the same file or server, a raw nats-py echo on the same broker.
``python -m bench [PART ...]`` runs some parts (``make bench BENCH_ARGS="board wire"``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from bench import (
    agents,
    board,
    cli,
    github,
    gitlab,
    gitlab_group,
    hostile,
    hostile_listener,
    hostile_wire,
    jira,
    linear,
    profile,
    scale,
    scope,
    twoway,
    wire,
    writes,
)

PARTS = (
    "board",
    "wire",
    "writes",
    "agents",
    "hostile",
    "scale",
    "github",
    "scope",
    "gitlab",
    "gitlab-group",
    "jira",
    "linear",
    "twoway",
    "cli",
)
# Run only when named: a diagnosis of where a write's time goes, not a figure with a limit.
EXTRA = ("profile",)


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("parts", nargs="*", choices=[*PARTS, *EXTRA, []], help="default: all")
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks on the SQLite board")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("COTAL_TASKS_BENCH_POSTGRES")
        or os.environ.get("COTAL_TASKS_TEST_POSTGRES"),
        help="an admin URL of a PostgreSQL server; the bench makes and drops its own database",
    )
    parser.add_argument("--pg-tasks", type=int, default=20_000)
    parser.add_argument("--scale-tasks", type=int, default=1_000_000)
    parser.add_argument("--cache", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--github-issues", type=int, default=10_000)
    parser.add_argument("--github-rounds", type=int, default=3)
    parser.add_argument(
        "--github-large-issues",
        type=int,
        default=50_000,
        help="the large import, timed in one round (0: skip)",
    )
    parser.add_argument("--gitlab-issues", type=int, default=10_000)
    parser.add_argument("--gitlab-rounds", type=int, default=3)
    parser.add_argument("--jira-issues", type=int, default=2_000)
    parser.add_argument("--jira-rounds", type=int, default=3)
    parser.add_argument("--linear-issues", type=int, default=2_000)
    parser.add_argument("--linear-rounds", type=int, default=3)
    parser.add_argument("--twoway-seconds", type=float, default=60.0)
    opts = parser.parse_args()
    parts = opts.parts or list(PARTS)
    print(f"cotal-tasks bench: {', '.join(parts)}; medians of {opts.rounds} rounds (spread)")
    if "board" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            await board.bench_sqlite(Path(tmp), opts.tasks, opts.rounds)
        if opts.postgres:
            await board.bench_postgres(opts.postgres, opts.pg_tasks, opts.rounds)
        else:
            print("\nPostgreSQL: skipped (set COTAL_TASKS_BENCH_POSTGRES or pass --postgres)")
    if "wire" in parts:
        await wire.main(rounds=opts.rounds)
    if "hostile" in parts:
        await hostile.main(rounds=opts.rounds)
        await hostile_wire.main(rounds=opts.rounds)
        await hostile_listener.main(rounds=opts.rounds)
    if "writes" in parts:
        await writes.main(rounds=opts.rounds, postgres=opts.postgres)
    if "agents" in parts:
        await agents.main(rounds=opts.rounds)
    if "profile" in parts:
        await profile.main(rounds=opts.rounds)
    if "scale" in parts:
        await scale.main(opts.cache, opts.scale_tasks, opts.rounds)
    if "github" in parts:
        await github.main(opts.github_issues, opts.github_rounds, opts.github_large_issues)
    if "scope" in parts:
        await scope.main(rounds=opts.github_rounds)
    if "gitlab" in parts:
        await gitlab.main(issues=opts.gitlab_issues, rounds=opts.gitlab_rounds)
    if "gitlab-group" in parts:
        await gitlab_group.main(rounds=opts.gitlab_rounds)
    if "jira" in parts:
        await jira.main(issues=opts.jira_issues, rounds=opts.jira_rounds)
    if "linear" in parts:
        await linear.main(issues=opts.linear_issues, rounds=opts.linear_rounds)
    if "twoway" in parts:
        await twoway.main(seconds=opts.twoway_seconds)
    if "cli" in parts:
        await cli.main(rounds=opts.rounds)


if __name__ == "__main__":
    asyncio.run(main())
