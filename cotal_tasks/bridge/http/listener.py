"""The listener's bounds (``[http.limits]``): what one peer, or many, may hold of it.

uvicorn closes a keep-alive connection idle between requests (``idle_timeout_s``, its
``timeout_keep_alive``) and h11 bounds a request head's size (16 KiB), but nothing of
uvicorn bounds the time a head takes to arrive, the time a peer takes to read its answer,
nor the connections open at once: a client sending a byte every few seconds holds its
connection, one that never reads holds its answer (and, pipelining, a request slot), and
a few hundred of either exhaust the process's files. ``BoundedH11`` is uvicorn's h11
protocol with:

- a head deadline (``header_timeout_s``, from the connection's start or the previous
  answer's end): a head not whole by then closes the connection;
- a write deadline (``write_timeout_s``). The transport says when a byte first waits for
  the peer and when the peer has taken them all (its write buffer's high-water mark is
  0). A peer that falls behind must have taken the whole answer within the deadline (an
  event stream, which never ends: caught up within it, each time it falls behind); past
  it the connection is dropped, what it did not take with it. Until the peer has taken
  an answer, the next pipelined request is not read: a peer that does not read holds its
  connection, for at most the deadline, and no request slot. The kernel's send buffer of
  a connection is ``send_buffer_bytes`` (instead of growing to 4 MiB), so such a peer is
  behind, and costs no more answers, once that much is written;
- connection caps: ``max_connections_per_peer`` from one address, and ``max_connections``
  in all (lowered to half the process's open-file limit when that is smaller). Past the
  first, the connection is refused; past the second, the connection idle longest
  (waiting for a head, or for its peer to take an answer; never one whose request runs)
  is dropped to make room, and the newcomer is refused only when none is idle. A
  refusal is 503 with ``Retry-After``, written before anything of the connection is
  read, and the connection closed.

What is shed is counted and logged at most once a minute (``ShedLog``), never per peer.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.shed import EVENTS_PATH, ShedLog

log = logging.getLogger(__name__)

MAX_ACCEPT_BATCH = 128


def connection_cap(limits: HttpLimits) -> int:
    """``max_connections``, or half the open-file limit when that is lower: the rest stays
    for the databases, the broker and the trackers."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or limits.max_connections <= soft // 2:
        return limits.max_connections
    capped = max(1, soft // 2)
    log.warning(
        "HTTP: [http.limits] max_connections = %d is more than half the open-file limit "
        "(%d); taking %d. Raise the limit (ulimit -n) to allow more",
        limits.max_connections,
        soft,
        capped,
    )
    return capped


def accept_batch(cap: int) -> int:
    """The listen backlog, which is also how many connections asyncio accepts in one go,
    before any of them is counted against the cap (and, out of files, it logs every
    failed accept of the batch): small enough that the cap, two batches and the process's
    other files fit in the open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_ACCEPT_BATCH
    return max(1, min(MAX_ACCEPT_BATCH, (soft - cap) // 4))


class Deadline:
    """One of a connection's deadlines: ``late`` runs ``seconds`` after ``start``, unless
    ``clear`` comes first."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float, late: Callable[[], None]):
        self.loop, self.seconds, self.late = loop, seconds, late
        self._timer: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        return self._timer is not None

    def start(self) -> None:
        self.clear()
        self._timer = self.loop.call_later(self.seconds, self._fire)

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        self.late()


def _refusal(retry_after_s: int) -> bytes:
    body = (
        b'{"error":{"code":"unavailable","message":"the bridge has as many connections open '
        b'as it takes. Retry after the Retry-After seconds"}}'
    )
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"retry-after: %d\r\ncache-control: no-store\r\nx-content-type-options: nosniff\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (retry_after_s, len(body), body)
    )


def bounded_protocol(limits: HttpLimits, shed: ShedLog, cap: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol within the head and write deadlines and the connection caps
    (``cap``: ``connection_cap``)."""
    refusal = _refusal(limits.retry_after_s)
    per_peer: dict[str, int] = {}  # open connections, by the peer's address
    idle: OrderedDict[H11Protocol, None] = OrderedDict()  # no request runs; idle longest first

    class BoundedH11(H11Protocol):
        _peer: str | None = None  # counted in per_peer
        _taken_first = False  # an answer is whole, its peer has not taken it: the next waits

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head = Deadline(self.loop, limits.header_timeout_s, self._head_late)
            self._write = Deadline(self.loop, limits.write_timeout_s, self._write_late)
            transport.set_write_buffer_limits(high=0)  # told of the first byte that waits
            if limits.send_buffer_bytes:  # a peer that does not read is behind sooner
                sock = transport.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, limits.send_buffer_bytes)
            peer = self.client[0] if self.client else ""
            if per_peer.get(peer, 0) >= limits.max_connections_per_peer:
                self._refuse(
                    "connections of one peer",
                    "raise [http.limits] max_connections_per_peer if one address opens "
                    "them for many clients (a proxy in front)",
                )
                return
            per_peer[peer] = per_peer.get(peer, 0) + 1
            self._peer = peer
            if not self._room():
                self._refuse("connections", "raise [http.limits] max_connections if it is real")
                return
            idle[self] = None
            self._head.start()

        def _refuse(self, what: str, remedy: str) -> None:
            shed.shed(what, remedy)
            self.transport.write(refusal)
            self.transport.close()

        def _room(self) -> bool:
            """Whether this connection fits under the cap, once the connection idle
            longest is dropped if need be."""
            if len(self.connections) <= cap:
                return True
            while idle:
                oldest, _ = idle.popitem(last=False)
                if not oldest.transport.is_closing():
                    shed.shed("idle connections dropped", "raise [http.limits] max_connections")
                    oldest.transport.abort()
                    return True
            return False

        def _idle(self) -> bool:
            """No request of this connection runs."""
            return self.cycle is None or self.cycle.response_complete

        def _head_late(self) -> None:
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                shed.shed("slow request heads", "a client sends its head too slowly")
                self.transport.close()

        def pause_writing(self) -> None:
            """A byte waits for the peer: the deadline runs (uvicorn holds the next write)."""
            super().pause_writing()
            if not self._write.running:
                self._write.start()

        def resume_writing(self) -> None:
            """The peer has taken every byte written."""
            super().resume_writing()
            if not self._idle() and self.scope.get("path") != EVENTS_PATH:
                return  # within an answer: the deadline is the whole answer's
            self._write.clear()
            if self._taken_first:
                self._taken_first = False
                self._next_request()

        def _write_late(self) -> None:
            if self.transport.get_write_buffer_size() == 0:
                return  # the peer has caught up; the answer itself is slow, not the peer
            shed.shed("slow readers", "a peer does not read its answers")
            self.transport.abort()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._head.clear()  # the head is in: the request runs
            if not self._idle():
                idle.pop(self, None)

        def on_response_complete(self) -> None:
            idle[self] = None
            idle.move_to_end(self)  # the newest idle
            if self.transport.get_write_buffer_size() > 0:
                self._taken_first = True  # the next request once the peer took this answer
                return
            self._write.clear()
            self._next_request()

        def _next_request(self) -> None:
            super().on_response_complete()  # the keep-alive timer, the next pipelined request
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._head.start()  # the next head, whole, within the deadline

        def shutdown(self) -> None:
            if self.transport.get_write_buffer_size() > 0:
                self.transport.abort()  # its peer is behind: the stop does not wait on it
                return
            super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head.clear()
            self._write.clear()
            idle.pop(self, None)
            if self._peer is not None:
                left = per_peer.pop(self._peer) - 1
                if left:
                    per_peer[self._peer] = left
                self._peer = None
            super().connection_lost(exc)

    return BoundedH11


def uvicorn_options(limits: HttpLimits, cap: int) -> dict[str, Any]:
    """What uvicorn itself bounds: the keep-alive idle time, and the listen backlog
    (``accept_batch``). Its own concurrency limit stays off: it answers 503 without
    ``Retry-After`` and logs every refusal."""
    return {
        "timeout_keep_alive": limits.idle_timeout_s,
        "limit_concurrency": None,
        "backlog": accept_batch(cap),
    }
