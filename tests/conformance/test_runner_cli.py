"""``cotal-tasks conformance`` as an operator runs it: a separate process judging a running
endpoint, one line per check, a closing count, and an exit code that tells.

A runner that can only pass proves nothing, so the same command is also pointed at an
endpoint made non-conformant in the one way section 6 warns about (it refuses every
``update-task``, so it passes every denial check), and must fail exactly the positive
checks that catch it.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.bridge.service.commands import Call, CommandService
from cotal_tasks.client.conformance import CHECKS
from cotal_tasks.core import ContractError, ErrorCode
from tests.conformance.conftest import Mesh
from tests.support.bridge import ENDPOINT, SPACE
from tests.support.cli import CLI

LINE = re.compile(r"^(PASS|FAIL|SKIP) (\S+) — (.+)$")
SUMMARY = re.compile(r"^conformance: (\d+) passed, (\d+) failed, (\d+) skipped$")


async def conformance(url: str, *extra: str) -> tuple[int, list[str], str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI),
        "conformance",
        *("--nats", url, "--space", SPACE, "--endpoint", ENDPOINT),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    assert proc.returncode is not None
    return proc.returncode, out.decode().splitlines(), err.decode()


def verdicts(lines: list[str]) -> dict[str, tuple[str, str]]:
    found = {}
    for line in lines[1:-1]:
        match = LINE.fullmatch(line)
        assert match, f"not a PASS/FAIL/SKIP line: {line!r}"
        found[match.group(2)] = (match.group(1), match.group(3))
    return found


async def test_a_conformant_endpoint_passes_every_check_it_can_run(mesh: Mesh) -> None:
    code, lines, err = await conformance(mesh.url)

    assert code == 0, (lines, err)
    assert lines[0].startswith(f"conformance of {ENDPOINT} in space {SPACE}")
    seen = verdicts(lines)
    assert list(seen) == [check.name for check in CHECKS]
    skipped = {name for name, (status, _) in seen.items() if status == "SKIP"}
    assert skipped == {"03-unreadable-store", "09-broker-bind"}, seen
    assert "operator's hand" in seen["03-unreadable-store"][1]
    assert "--creds self-only=FILE" in seen["09-broker-bind"][1]
    assert SUMMARY.fullmatch(lines[-1])
    assert lines[-1] == f"conformance: {len(CHECKS) - 2} passed, 0 failed, 2 skipped"


async def test_json_gives_each_check_and_the_counts_for_scripts(mesh: Mesh) -> None:
    """Before: only lines; a script parsed PASS/FAIL text."""
    code, lines, err = await conformance(mesh.url, "--json", "--check", "01", "--check", "04")

    assert code == 0, (lines, err)
    report = json.loads("\n".join(lines))
    assert report["endpoint"] == ENDPOINT
    assert [(c["name"], c["status"]) for c in report["checks"]] == [
        ("01-describe", "PASS"),
        ("04-absent-task", "PASS"),
    ]
    assert (report["passed"], report["failed"], report["skipped"]) == (2, 0, 0)


async def test_an_endpoint_refusing_every_update_fails_the_positive_checks(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = CommandService.handle

    async def refuse_updates(self: CommandService, call: Call) -> Any:
        if call.command == "update-task":
            raise ContractError(
                ErrorCode.PERMISSION_DENIED, "refused, as a plausible provider would"
            )
        return await handle(self, call)

    monkeypatch.setattr(CommandService, "handle", refuse_updates)

    code, lines, err = await conformance(mesh.url)

    assert code == 1, (lines, err)
    seen = verdicts(lines)
    failed = {name for name, (status, _) in seen.items() if status == "FAIL"}
    # The positive path catches it (19 to 22). Check 13 passes: its credential-shaped
    # evidence is refused as bad-request by the one validation of the call's args, which
    # runs when the wire admits the call, before any provider could answer otherwise.
    assert failed == {
        "19-blocked",
        "20-evidence",
        "21-done",
        "22-my-tasks-done",
    }, seen
    assert "the blocked step was refused: permission-denied" in seen["19-blocked"][1]
    for denial in ("08-update-denied", "10-new-incarnation"):
        assert seen[denial][0] == "PASS", seen[denial]  # a denial suite's blind spot
    assert SUMMARY.fullmatch(lines[-1])
    assert ", 4 failed," in lines[-1]


async def test_the_command_line_refuses_what_it_cannot_use(mesh: Mesh, tmp_path: Path) -> None:
    creds = tmp_path / "operator.creds"
    creds.write_text("not a credential", encoding="utf-8")
    code, _, err = await conformance(mesh.url, "--creds", f"operator={creds}")
    assert code == 2
    assert "--creds given without --seat for: operator" in err

    code, _, err = await conformance(mesh.url, "--check", "99")
    assert code == 2
    assert "no check is named 99" in err
