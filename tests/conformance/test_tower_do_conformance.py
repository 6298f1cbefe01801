"""Section 6 of the tasks endpoint contract against a tower-do-backed endpoint, over the
real wire: a nats-server, the real bridge serving a ``provider = "tower-do"`` endpoint on
a board file, and the conformance runner (``cotal_tasks.client.conformance``) judging it.
The tests are the very ones ``test_section6.py`` runs against the board (imported, so the
suites cannot drift); only the ``mesh`` fixtures differ. After each check the board file
is folded again, and tower-do must be able to fold every line of it.

What holds, what differs, and why:

- Every check of the runner holds as written, the versioned-rail one included. The seats of
  these checks are in no seat directory, so a claim writes ``in_progress`` with no
  ``owner`` and the binding lives in the mirror (as for a GitHub account-less seat);
  ``test_store.py`` covers directory seats, whose claims set ``owner``.
- Check 3 spoils the mirror, which is the store reads come from (holds); the board file
  itself unreadable is a stale read, not an empty one (``test_store.py``).
- Check 9 holds: its broker half runs on a permissioned broker with a tower-do-backed
  bridge started under exactly its ``--serve`` rows (the refused bind writes nothing to the
  board; the operator's bind writes ``in_progress`` as ``tower``).
- What tower-do cannot hold: a binding's lifecycle uid, ``boundBy`` and environment. These
  live in the mirror, as for the hosted trackers. Evidence is written to the board as a
  message threaded under the task and read back from there (``test_store.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.providers.tower_do import TowerDoConfig
from cotal_tasks.providers.tower_do.fold import fold_text
from tests.conformance import hosted
from tests.conformance.conftest import Mesh, mesh_fixtures, open_mesh
from tests.conformance.test_section6 import (  # noqa: F401  (collected here, on tower-do)
    passes,
    permissioned_context,
    test_check,
    test_check_12_list_limit_is_capped_at_ceiling,
)
from tests.providers.tower_do._support import tower_of
from tests.support.bridge import ENDPOINT
from tests.support.trackers import Tracker


@asynccontextmanager
async def tower_do_mesh(tmp_path: Path, **endpoint: object) -> AsyncIterator[Mesh]:
    board = tmp_path / "project" / "board.jsonl"
    config = TowerDoConfig(board=board)
    async with open_mesh(tmp_path, settings=config, **endpoint) as running:
        tower_of(running.bridge.endpoints[0])  # served from the board file
        yield running
    if board.exists():  # what the endpoint wrote is a log tower-do folds whole
        assert fold_text(board.read_text(encoding="utf-8")).skipped == 0


mesh, small_mesh = mesh_fixtures(tower_do_mesh)


def _statuses(board: Path, subject: str) -> list[str]:
    """The board's row of that subject as a label list: [] while pending, else its status."""
    fold = fold_text(board.read_text(encoding="utf-8")) if board.exists() else None
    rows = [row for row in (fold.tasks.values() if fold else ()) if row.subject == subject]
    return [row.status for row in rows if row.status != "pending"]


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = tmp_path / "project" / "board.jsonl"
    tracker = Tracker(
        provider="tower-do",
        section=lambda _: f'provider = "tower-do"\n[endpoints.tower_do]\nboard = "{board}"\n',
        endpoint=lambda _: EndpointConfig(name=ENDPOINT, settings=TowerDoConfig(board=board)),
        labels_of=_statuses,
        claimed="in_progress",
    )
    async with hosted.permissioned_hosted_mesh(tmp_path, monkeypatch, tracker, "") as mesh:
        await passes(permissioned_context(mesh.seat, mesh.operator), "09-broker")
        denied = [str(e).lower() for e in mesh.seat_errors.seen if "publish" in str(e).lower()]
        # The broker refused the seat's bind in both modes (a publish the runner repeated on
        # a loaded machine is refused again: counted per mode, not in total).
        assert any(".bind-task.owner." in e for e in denied), denied
        assert any(".bind-task.any." in e for e in denied), denied
        assert all(".bind-task." in e for e in denied), denied
        assert not any(".bind-task." in s and ".local.seat." in s for s in mesh.routed)
        assert _statuses(board, "Only an operator binds this") == ["in_progress"]
        assert mesh.bridge_denials() == []
    last = fold_text(board.read_text(encoding="utf-8"))
    assert [row.status for row in last.tasks.values()] == ["in_progress"]
