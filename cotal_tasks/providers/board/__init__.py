"""The self-hosted board: SQLite by default, PostgreSQL to scale out."""

from cotal_tasks.providers.board.store import BoardStore, normalize_url

__all__ = ["BoardStore", "normalize_url"]
