"""The bench's fake GitHub in a process of its own, for timing an import against the
requests it made.

GitHub answers on its own machines: while it prepares the next page, the bridge maps and
commits the last one. A fake served in the bridge's own event loop would make every
answer the bridge's work too, and no overlap could show. So the import's time is measured
against this fake (the same ``bench.github.build``) serving on loopback from its own
process: on the same cores, paid alike by the import and by the baseline that replays
the import's requests with a bare client.

``python -m bench.github_remote ISSUES`` builds the fake, serves it, and prints one JSON
line (its URL, token and repository); then it answers commands on stdin, one a line: ``clear``
empties its request log, ``log`` prints the log as one JSON line, ``edit NUMBER TITLE``
retitles an issue (a person's edit) and prints its ``issues`` ``edited`` webhook payload
as one JSON line (the webhook bench signs and posts it). It stops when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

import httpx

RATE = 10**9  # the fake's request budget: the bench measures time, not the rate limit


@dataclass
class Remote:
    """The fake GitHub's process: its API URL, its token, its repository, and its
    request log."""

    url: str
    token: str
    repo: str
    process: asyncio.subprocess.Process

    async def _ask(self, command: str) -> bytes:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()
        return await self.process.stdout.readline()

    async def clear(self) -> None:
        await self._ask("clear")

    async def edit(self, number: int, title: str) -> dict[str, Any]:
        """Retitle issue ``number`` (one line of text) as a person would: its webhook
        payload."""
        payload: dict[str, Any] = json.loads(await self._ask(f"edit {number} {title}"))
        return payload

    async def log(self) -> list[dict[str, Any]]:
        """The requests answered since the last ``clear``: method, path, query, headers
        (those the fake logs), status and body."""
        entries: list[dict[str, Any]] = json.loads(await self._ask("log"))
        return entries


@asynccontextmanager
async def remote_github(issues: int) -> AsyncIterator[Remote]:
    """The fake GitHub of ``issues`` issues serving from its own process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.github_remote",
        str(issues),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=2**30,  # the log is one line
    )
    try:
        assert process.stdout is not None
        started = json.loads(await process.stdout.readline())
        yield Remote(started["url"], started["token"], started["repo"], process)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


def bare_headers(token: str) -> dict[str, str]:
    """What a bare client sends the fake with every request."""
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}


async def replay(url: str, token: str, requests: list[dict[str, Any]]) -> float:
    """The baseline: ``requests`` sent again back to back with a bare client (method,
    path, query, body; a conditional request's ``If-None-Match``), each answer read as
    JSON; the seconds it took."""
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(base_url=url, headers=bare_headers(token)) as client:
        start = loop.time()
        for request in requests:
            conditional = request["headers"].get("if-none-match")
            response = await client.request(
                request["method"],
                request["path"],
                params=request["query"] or None,
                json=request["body"],
                headers={"If-None-Match": conditional} if conditional else None,
            )
            if response.content:
                response.json()
        return loop.time() - start


async def _serve(issues: int) -> None:
    from bench.github import REPO, build
    from tests.support.fake_github import issues_payload, serve_fake_github

    fake, _ = build(issues)
    fake.set_rate_limit(RATE, limit=RATE)
    loop = asyncio.get_running_loop()
    async with serve_fake_github(fake) as url:
        print(json.dumps({"url": url, "token": fake.token, "repo": REPO}), flush=True)
        while command := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            if command == "clear":
                fake.requests.clear()
                print("ok", flush=True)
            elif command == "log":
                print(json.dumps([asdict(r) for r in fake.requests]), flush=True)
            elif command.startswith("edit "):
                _, number, title = command.split(" ", 2)
                fake.set_title(fake.issue(REPO, int(number)), title, "octocat")
                payload = issues_payload(fake, "edited", REPO, int(number))
                print(json.dumps(payload), flush=True)


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1])))
