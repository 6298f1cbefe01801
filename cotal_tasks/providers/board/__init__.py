"""The board: tasks kept in the bridge's own database (SQLite or PostgreSQL), the source of
truth itself. As a provider it has no settings of its own and nothing to run: ``build``
serves the endpoint's board store as it is."""

from cotal_tasks.providers.board.config import BoardConfig
from cotal_tasks.providers.board.store import BoardStore, BoardUnreachable, normalize_url
from cotal_tasks.providers.provider import BuildContext, Built, Provider

__all__ = ["PROVIDER", "BoardConfig", "BoardStore", "BoardUnreachable", "normalize_url"]


async def build(config: BoardConfig, ctx: BuildContext) -> Built:
    return Built(ctx.mirror, json_reads=ctx.json_reads)


PROVIDER = Provider("board", BoardConfig, build)
