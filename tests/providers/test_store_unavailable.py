"""A store that cannot read says ``unavailable``; it never answers an empty page."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from cotal_tasks.core import ContractError, CreateTaskInput, ErrorCode, create_task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import PageQuery, Write
from tests.support.tcp_proxy import TcpProxy


async def assert_unavailable(store: BoardStore) -> None:
    for read in (
        store.page(PageQuery(limit=10)),
        store.get("t-1"),
        store.change_seq(),
        store.recall("k", 0),
    ):
        with pytest.raises(ContractError) as caught:
            await read
        assert caught.value.code is ErrorCode.UNAVAILABLE
        assert "retry" in caught.value.message


async def test_a_corrupt_sqlite_file_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    path.write_bytes(b"this is not a database, it is a note\n" * 200)
    with pytest.raises(ContractError) as caught:
        await BoardStore.open(f"sqlite:///{path}")
    assert caught.value.code is ErrorCode.UNAVAILABLE


async def test_a_board_file_damaged_while_serving_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    store = await BoardStore.open(f"sqlite:///{path}")
    try:
        await store.close()  # drop pooled connections so the next read opens the file anew
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"\x00garbage" * 4096)
        await assert_unavailable(store)
    finally:
        await store.close()


async def test_a_stopped_postgresql_is_unavailable_not_empty(postgres_database: str) -> None:
    url = make_url(postgres_database)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    port = await proxy.start()
    store = await BoardStore.open(
        url.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    )
    try:
        task = create_task(CreateTaskInput(title="x"), task_id="t-1", space="s", now=1)
        await store.commit(Write(task, None, "create-task", "local.op"))
        assert len((await store.page(PageQuery(limit=10))).tasks) == 1
        await proxy.stop()
        await assert_unavailable(store)
        with pytest.raises(ContractError) as caught:
            await store.commit(Write(task, 1, "update-task", "local.op"))
        assert caught.value.code is ErrorCode.UNAVAILABLE
    finally:
        await store.close()


async def test_an_unreachable_postgresql_refuses_to_open() -> None:
    with pytest.raises(ContractError) as caught:
        await BoardStore.open("postgresql://postgres@127.0.0.1:1/none")
    assert caught.value.code is ErrorCode.UNAVAILABLE


async def test_migrations_are_idempotent_and_safe_to_run_concurrently(
    postgres_database: str,
) -> None:
    stores = await asyncio.gather(*(BoardStore.open(postgres_database) for _ in range(3)))
    try:
        assert [await s.change_seq() for s in stores] == [0, 0, 0]
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize("url", ["mysql://root@localhost/test", "not a url"])
async def test_an_unsupported_board_url_is_a_bad_request(url: str) -> None:
    with pytest.raises(ContractError) as caught:
        await BoardStore.open(url)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "sqlite:///" in caught.value.message
