"""Hostile HTTP peers as raw sockets on loopback: slow readers (a small receive buffer,
requests pipelined, nothing ever read) and idle sockets (connected, nothing sent).

Each peer can come from its own loopback address (``peer_address``: the whole of
127.0.0.0/8 is this host), so a listener's per-peer bounds see many peers, as they
would on the internet, or from one. Whether the listener let go of a socket is read from
the kernel's table of TCP sockets (``cut``), never by reading it: a slow reader that read
would no longer be one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

SMALL_RCVBUF = 4096  # the kernel doubles it and keeps a floor; a few KiB either way
# Requests each slow reader pipelines: their answers (512 of /v1/openapi.json, about 9 MB)
# outgrow what the kernel buffers for one connection (tcp_wmem's 4 MiB at most).
PIPELINE = 512
IDLE_PEERS = 100  # the addresses idle sockets come from
_ESTABLISHED = "01"  # /proc/net/tcp's state of an established connection


def peer_address(n: int) -> str:
    """The ``n``-th peer's own loopback address (127.1.0.1, 127.1.0.2, …)."""
    return f"127.1.{n // 250}.{n % 250 + 1}"


async def connect(
    host: str, port: int, *, source: str | None = None, rcvbuf: int | None = None
) -> socket.socket:
    """A connected non-blocking socket, from ``source`` when given; ``rcvbuf`` is set
    before the connection is made, so the window it advertises is small from the start."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            sock.bind((source, 0))
        sock.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), 10)
    except BaseException:
        sock.close()
        raise
    return sock


def pipelined(path: str, count: int) -> bytes:
    """``count`` GETs of ``path``, back to back, as one write."""
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode() * count


def listener_ends(sockets: Iterable[socket.socket]) -> list[tuple[str, int] | None]:
    """For each of ``sockets``, the listener's end of its connection as the kernel's table
    of TCP sockets (``/proc/net/tcp``) shows it: its state and the bytes it has queued to
    send; ``None`` when it is gone. Read from the table, never from the socket: nothing
    of what waits in its receive buffer is taken, and nothing is sent."""
    table = Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]
    rows = {(row[1], row[2]): row for row in (line.split() for line in table)}
    found: list[tuple[str, int] | None] = []
    for sock in sockets:
        try:
            row = rows.get((_entry(sock.getpeername()), _entry(sock.getsockname())))
        except OSError:  # reset: no peer any more
            row = None
        found.append(None if row is None else (row[3], int(row[4].split(":")[0], 16)))
    return found


def cut(sockets: Iterable[socket.socket]) -> list[bool]:
    """For each of ``sockets``, whether the listener has let go of it (its end is gone or
    no longer established; the peer's own end can stay established, as a reset sent into
    a full window is not taken)."""
    return [end is None or end[0] != _ESTABLISHED for end in listener_ends(sockets)]


def backed_up(sockets: Iterable[socket.socket]) -> list[bool]:
    """For each of ``sockets``, whether the listener's end is established with bytes
    queued that its peer has not taken."""
    return [
        end is not None and end[0] == _ESTABLISHED and end[1] > 0 for end in listener_ends(sockets)
    ]


def _entry(address: tuple[str, int]) -> str:
    """An IPv4 address and port as /proc/net/tcp writes them."""
    host, port = address
    return f"{int.from_bytes(socket.inet_aton(host), 'little'):08X}:{port:04X}"


class Peers:
    """The sockets of hostile peers, all closed when the block ends."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.sockets: list[socket.socket] = []

    async def slow_reader(self, n: int, path: str, *, spread: bool = True) -> socket.socket:
        """The ``n``-th slow reader: ``PIPELINE`` GETs of ``path`` pipelined, nothing ever
        read; from its own address when ``spread``, else from 127.0.0.1."""
        source = peer_address(n) if spread else None
        sock = await connect(self.host, self.port, source=source, rcvbuf=SMALL_RCVBUF)
        self.sockets.append(sock)
        await asyncio.get_running_loop().sock_sendall(sock, pipelined(path, PIPELINE))
        return sock

    async def slow_readers(
        self, count: int, path: str, *, spread: bool = True
    ) -> list[socket.socket]:
        return [await self.slow_reader(n, path, spread=spread) for n in range(count)]

    async def idle_socket(self, n: int) -> socket.socket:
        """The ``n``-th idle socket (nothing sent), from one of ``IDLE_PEERS`` addresses
        apart from the slow readers'."""
        sock = await connect(self.host, self.port, source=peer_address(1000 + n % IDLE_PEERS))
        self.sockets.append(sock)
        return sock

    async def idle(self, count: int) -> list[socket.socket]:
        return [await self.idle_socket(n) for n in range(count)]

    async def press(self, slow: int, idle: int, path: str, on_pressing: Callable[[], None]) -> None:
        """Keep ``slow`` slow readers and ``idle`` idle sockets on the listener until
        cancelled, each one it lets go of opened again (as a determined attacker would).
        ``on_pressing`` is called once most slow readers' answers are backed up (or after
        a minute)."""
        readers = await self.slow_readers(slow, path)
        idlers = await self.idle(idle)
        loop = asyncio.get_running_loop()
        said, started = False, loop.time()
        while True:
            await asyncio.sleep(0.5)
            if not said and (sum(backed_up(readers)) >= 0.9 * slow or loop.time() > started + 60):
                said = True
                on_pressing()
            await self._again(readers, lambda n: self.slow_reader(n, path))
            await self._again(idlers, self.idle_socket)

    async def _again(
        self, group: list[socket.socket], open_: Callable[[int], Awaitable[socket.socket]]
    ) -> None:
        """Open again each socket of ``group`` the listener let go of."""
        for n, gone in enumerate(cut(group)):
            if not gone:
                continue
            with contextlib.suppress(OSError, TimeoutError):  # tried again next time
                fresh = await open_(n)
                self.sockets.remove(group[n])
                group[n].close()
                group[n] = fresh

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


@contextmanager
def hostile_peers(host: str, port: int) -> Iterator[Peers]:
    peers = Peers(host, port)
    try:
        yield peers
    finally:
        peers.close()
