"""tower-do boards as a provider: a board file served as an endpoint, both ways.

Everything tower-do-specific lives here: the settings (``config``), the fold of its log
(``fold``), its write rules (``rules``), the mapping onto the contract (``mapping``), the
file on disk (``boardfile``), the store over a local mirror (``store``), the follower
(``follow``), and ``build``, which the composition root calls through the registry.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from cotal_tasks.core import ContractError, Task
from cotal_tasks.providers.provider import BuildContext, Built, CatchUpReport, Progress, Provider
from cotal_tasks.providers.tower_do import mapping
from cotal_tasks.providers.tower_do.boardfile import BoardFile
from cotal_tasks.providers.tower_do.config import TowerDoConfig
from cotal_tasks.providers.tower_do.follow import Follower
from cotal_tasks.providers.tower_do.store import TowerDoStore, unreadable
from cotal_tasks.providers.tower_do.worker import FileWorker

__all__ = ["PROVIDER", "TowerDo", "TowerDoConfig", "TowerDoStore", "build", "preview"]


@dataclass
class TowerDo:
    """A tower-do endpoint's parts: the store over its mirror, and the follower."""

    store: TowerDoStore
    follower: Follower
    config: TowerDoConfig


async def build(config: TowerDoConfig, ctx: BuildContext) -> Built:
    """The store over the mirror, folded from the board file once; the follower runs it."""
    store = TowerDoStore(
        ctx.mirror, config, space=ctx.space, clock=ctx.clock, seat_uids=ctx.seat_uids
    )
    tower = TowerDo(store, Follower(store, config.poll_interval_s), config)
    with contextlib.suppress(ContractError):  # unreadable: reads say stale, not empty
        await store.refresh()

    async def catch_up(progress: Progress | None = None) -> CatchUpReport:
        await store.refresh()  # opening folded it already
        return CatchUpReport((f"caught up with {config.board_file()}",))

    return Built(
        store,
        runner=tower.follower,
        on_change=store.on_change,
        catch_up=catch_up,
        parts=tower,
    )


def describe(config: TowerDoConfig) -> list[str]:
    return [
        f"tower-do board {config.board_file()}, {len(config.seats)} seats, "
        f"writes as {config.identity!r}, poll every {config.poll_interval_s:g} s"
    ]


async def preview_async(config: TowerDoConfig, space: str, count: int) -> list[tuple[int, Task]]:
    path = config.board_file()
    try:
        tasks = await FileWorker(str(path)).run(lambda: preview(config, space=space, count=count))
    except OSError as exc:
        raise unreadable(path, exc, "then run check-config again") from exc
    return list(enumerate(tasks, 1))


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


PROVIDER = Provider(
    "tower-do",
    TowerDoConfig,
    build,
    section="tower_do",
    describe=describe,
    preview=preview_async,
)
