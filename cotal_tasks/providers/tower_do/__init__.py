"""tower-do boards as a provider: a board file served as an endpoint, both ways.

Everything tower-do-specific lives here: the settings (``config``), the fold of its log
(``fold``), its write rules (``rules``), the mapping onto the contract (``mapping``), the
file on disk (``boardfile``), the store over a local mirror (``store``), the follower
(``follow``), and ``build``, which the composition root calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cotal_tasks.core import Task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.store import SeatUids, no_uids
from cotal_tasks.providers.tower_do import mapping
from cotal_tasks.providers.tower_do.boardfile import BoardFile
from cotal_tasks.providers.tower_do.config import TowerDoConfig
from cotal_tasks.providers.tower_do.follow import Follower
from cotal_tasks.providers.tower_do.store import TowerDoStore

__all__ = ["TowerDo", "TowerDoConfig", "TowerDoStore", "build", "preview"]


@dataclass
class TowerDo:
    """A tower-do endpoint's parts: the store over its mirror, and the follower."""

    store: TowerDoStore
    follower: Follower
    config: TowerDoConfig


def build(
    config: TowerDoConfig,
    mirror: BoardStore,
    *,
    space: str,
    clock: Callable[[], int],
    seat_uids: SeatUids = no_uids,
) -> TowerDo:
    store = TowerDoStore(mirror, config, space=space, clock=clock, seat_uids=seat_uids)
    return TowerDo(store, Follower(store, config.poll_interval_s), config)


def preview(config: TowerDoConfig, *, space: str, count: int) -> list[Task]:
    """How the ``count`` most recently updated rows of the board map; writes nothing."""
    board = BoardFile(config.board_file())
    board.refresh()
    fold = board.fold
    rows = sorted(fold.tasks.values(), key=lambda row: row.updated_at, reverse=True)[:count]
    return [
        mapping.project(
            row,
            fold.tasks,
            notes=fold.notes.get(row.key),
            space=space,
            seats=config.seats,
            existing=None,
            uid_of=lambda owner, actor: None,
            now=row.updated_at,
        )
        for row in rows
    ]
