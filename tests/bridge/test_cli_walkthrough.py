"""What ``serve`` prints, pasted as printed (real subprocesses, a shell for the pasting):
the banner says who may read the dashboard, and the listener agrees; the walkthrough's
commands work from the second start on (a task id the board holds, ``--config`` when the
bridge was given one); ``examples/walkthrough.md``'s commands work against that bridge,
and its refusals are refused for the reason the page gives."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.support.cli import CLI

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = re.compile(r"t-[0-9a-f]{12}")


@asynccontextmanager
async def banner(cwd: Path, config: str) -> AsyncIterator[list[str]]:
    """``.venv/bin/cotal-tasks serve --config <config>`` in ``cwd``; its banner, every
    line up to the walkthrough's last; stopped with SIGTERM when the block ends."""
    process = await asyncio.create_subprocess_exec(
        ".venv/bin/cotal-tasks", "serve", "--config", config, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert process.stdout is not None
        while not lines or not lines[-1].endswith("Stop with Ctrl-C."):
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, (lines, await process.stderr.read() if process.stderr else b"")
            lines.append(line.decode().rstrip("\n"))
        yield lines
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 60)


def pasted(lines: list[str]) -> list[str]:
    """The walkthrough's commands as a person pastes them: each line that starts with
    the command, joined with its ``\\`` continuation, its trailing comment dropped."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Walkthrough"))
    commands: list[str] = []
    for line in lines[start + 1 :]:
        text = line.strip()
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + " " + text
        elif text.startswith(".venv/bin/cotal-tasks"):
            commands.append(text)
    return [command.split("   #")[0] for command in commands]


async def shell(cwd: Path, command: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_shell(
        command, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def dashboard(lines: list[str]) -> tuple[str, str]:
    (line,) = [line for line in lines if line.startswith("Dashboard: ")]
    url, _, access = line.removeprefix("Dashboard: ").partition("  ")
    return url.rstrip("/"), access


async def test_the_banner_and_the_walkthrough_pasted_as_printed(tmp_path: Path) -> None:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "cotal-tasks").symlink_to(CLI)
    team = tmp_path / "team.toml"
    team.write_text(
        'space = "demo"\ndata_dir = ".cotal-tasks"\n[http]\nport = 0\n', encoding="utf-8"
    )

    # First start, an empty board: no id to offer yet, and the banner says so (before:
    # "t-…", which pasted gives not-found). No token and no local reader: the dashboard
    # is closed, and the banner says that too (before: "loopback: no token needed").
    async with banner(tmp_path, "team.toml") as lines:
        url, access = dashboard(lines)
        assert access.startswith("(closed: every request answers 401;"), access
        assert "local_reader = true" in access
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{url}/v1/endpoints")).status_code == 401
        commands = pasted(lines)
        assert all(" --config team.toml" in command for command in commands), commands
        assert any("TASK_ID" in command for command in commands)
        assert any("put the taskId create-task printed for TASK_ID" in line for line in lines)
        (create,) = [command for command in commands if "create-task" in command]
        code, out, err = await shell(tmp_path, create)
        assert code == 0, (create, out, err)

    # Second start, opened on loopback as the banner said how: a real task id in every
    # command, each pasted as printed succeeds, and the dashboard reads without a token.
    team.write_text(
        team.read_text(encoding="utf-8").replace("[http]\n", "[http]\nlocal_reader = true\n"),
        encoding="utf-8",
    )
    async with banner(tmp_path, "team.toml") as lines:
        url, access = dashboard(lines)
        assert access == "(loopback: no token needed)"
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{url}/v1/endpoints")).status_code == 200
        commands = pasted(lines)
        assert not any("TASK_ID" in command or "t-…" in command for command in commands)
        (task_id,) = set(TASK_ID.findall(" ".join(commands)))
        assert len(commands) == 7, commands
        for command in commands:
            code, out, err = await shell(tmp_path, command)
            assert code == 0, (command, out, err)
        code, out, _ = await shell(
            tmp_path, f".venv/bin/cotal-tasks history {task_id} --config team.toml --json"
        )
        assert [e["command"] for e in json.loads(out)["history"]] == [
            "create-task", "claim-task", "update-task",
        ]  # fmt: skip

        # examples/walkthrough.md, step 2 as written (its t-… is a task id the reader
        # puts in) and step 3's refusals, refused for the reasons the page gives.
        page = (ROOT / "examples" / "walkthrough.md").read_text(encoding="utf-8")
        block = page.split("```sh\n", 1)[1].split("```", 1)[0]
        step2 = [
            line
            for line in block.replace("\\\n", " ").splitlines()
            if line.startswith(".venv/bin/cotal-tasks")
        ]
        created = ""
        for command in step2:
            code, out, err = await shell(tmp_path, command.replace("t-…", created))
            assert code == 0, (command, out, err)
            if "create-task" in command:
                created = json.loads(out)["data"]["taskId"]
        step3 = page.split("3. Try a refusal:", 1)[1].split("4. ", 1)[0]
        refusal, denied = [
            " ".join(span.split()).replace("t-…", created)
            for span in re.findall(r"`(invoke [^`]+)`", step3)
        ]
        code, out, err = await shell(tmp_path, f".venv/bin/cotal-tasks {refusal}")
        assert code == 2, (out, err)
        error = json.loads(out)["error"]
        assert error["code"] == "bad-request"
        assert "args.status" in error["message"]  # before: "no seat was given"
        code, out, err = await shell(tmp_path, f".venv/bin/cotal-tasks {denied}")
        assert code == 1, (out, err)
        assert json.loads(out)["error"]["code"] == "permission-denied"
