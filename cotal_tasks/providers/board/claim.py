"""One database, one endpoint: the board's claim on its database.

A board's rows (tasks, ``changeSeq``, history, idempotency results, a mirror's state) carry
no endpoint, so two endpoints on one database would serve one board: a task created on
one would be listed on the other, and per-endpoint grants would no longer separate their
readers. The first endpoint served from a database records its name in ``ct_endpoint``;
any other endpoint opening it is refused, naming both and the remedy. A SQLite file's
claim is read before its sole-writer lock is taken, so a second endpoint on the file is
told so, not that "another process is serving" it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import tables


def shared(database: str, claimed_by: str, endpoint: str) -> ContractError:
    """The refusal of ``endpoint`` on a database ``claimed_by`` another endpoint holds."""
    return ContractError(
        ErrorCode.FAILED_PRECONDITION,
        f"the database {database} holds the board of endpoint {claimed_by}; endpoint "
        f"{endpoint} cannot share it (a board's rows are not scoped by endpoint, so each "
        "would list the other's tasks). Give endpoint "
        f"{endpoint} a database of its own (its own database key: another file, or another "
        f"database on the same PostgreSQL server), or serve these tasks from {claimed_by}",
    )


def sqlite_claim(file: str) -> str | None:
    """The endpoint a SQLite board file belongs to, read without writing (blocking: call
    it from a worker thread); ``None`` for no file, no claim yet, or no such table."""
    path = Path(file).expanduser().resolve()  # a file URI is absolute (data_dir may not be)
    if not path.is_file():
        return None
    with contextlib.suppress(sqlite3.Error):
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            row = connection.execute("SELECT name FROM ct_endpoint LIMIT 1").fetchone()
        finally:
            connection.close()
        return None if row is None else str(row[0])
    return None


async def claim(engine: AsyncEngine, database: str, endpoint: str, *, write: bool) -> None:
    """Check the database belongs to ``endpoint``; with ``write``, claim it when unclaimed.

    A database not migrated yet (``check-config`` opens without migrating) has no claim.
    """
    query = select(tables.endpoint.c.name).limit(1)
    for _ in range(2):  # another may claim it between the read and the insert: read again
        try:
            async with engine.begin() as conn:
                claimed = (await conn.execute(query)).scalar_one_or_none()
                if claimed is None and write:
                    row = {"slot": 1, "name": endpoint, "claimed_at": int(time.time() * 1000)}
                    await conn.execute(insert(tables.endpoint).values(**row))
                    return
        except IntegrityError:
            continue
        except SQLAlchemyError:
            if write:
                raise
            return  # not migrated: nothing claims it yet
        if claimed is not None and claimed != endpoint:
            raise shared(database, claimed, endpoint)
        return
