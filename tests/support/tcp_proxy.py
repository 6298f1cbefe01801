"""A loopback TCP proxy to a real server (a broker, a database), which a test can cut off
(every connection dropped, new ones refused) and mend (listening again on the same port)."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """A loopback TCP proxy to a real server; ``cut`` drops every connection and refuses
    new ones, ``mend`` listens again on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        """The proxy as a NATS url (for a broker behind it)."""
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> int:
        """Listen (on a fresh port the first time); return the port."""
        await self.mend()
        return self.port

    async def mend(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self._writers += [writer, up_writer]
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            pipe = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    async def cut(self) -> None:
        """Refuse new connections and drop every open one, as a stopped server would."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def stop(self) -> None:
        await self.cut()
