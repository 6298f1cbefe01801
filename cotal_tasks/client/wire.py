"""One request on the wire and its attributed reply, as Cotal's caller does it.

The reply subscription is opened on the caller's own rail, narrowed to the request's
nonce, before the request is published; the request's reply-to is a sentinel on that
rail that only the broker's no-responders status can reach. After publishing, a flush
tells a publish the broker refused (a permissions violation arrives before the flush's
answer) from a request nobody answered, so a missing grant is reported as such at once,
not as a timeout, and the request is not sent again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError

from cotal_tasks.client.errors import TasksError
from cotal_tasks.client.subjects import CallerRail, Responder
from cotal_tasks.core import ErrorCode

log = logging.getLogger(__name__)

ErrorCallback = Callable[[Exception], Awaitable[None]]
_KEPT_ERRORS = 256


def nonce() -> str:
    return secrets.token_urlsafe(24)


def new_id() -> str:
    """A fresh envelope id (``[A-Za-z0-9_-]``, 22 characters)."""
    return secrets.token_urlsafe(16)


class DenialWatch:
    """The permission errors a connection's broker reported, in order."""

    def __init__(self) -> None:
        self._seen: deque[str] = deque(maxlen=_KEPT_ERRORS)
        self._count = 0

    async def record(self, exc: Exception) -> None:
        self._seen.append(str(exc).lower())
        self._count += 1

    def mark(self) -> int:
        return self._count

    def denied(self, since: int, verb: str, subject: str) -> bool:
        """Whether the broker refused ``verb`` (publish, subscription) to ``subject``."""
        new = min(self._count - since, len(self._seen))
        wanted = f'permissions violation for {verb} to "{subject.lower()}"'
        return any(wanted in text for text in list(self._seen)[len(self._seen) - new :])


async def flush_queued(nc: NATS, timeout: int = 10) -> None:  # noqa: ASYNC109
    """Return once the broker has read every command queued on ``nc`` before the call.

    ``nc.flush()`` alone does not promise that: nats-py writes the flush's PING straight
    to the socket, ahead of the commands (a publish, a subscription) its flusher task has
    not written yet, so the PONG can come back before the broker read them, and before a
    permissions violation for them. The first round trip lets the flusher write what was
    queued; the second PING follows it on the socket, so its PONG comes after the broker
    processed (and answered any refusal of) every command queued before this call.
    """
    await nc.flush(timeout=timeout)
    await nc.flush(timeout=timeout)


_WATCHES: weakref.WeakKeyDictionary[NATS, DenialWatch] = weakref.WeakKeyDictionary()


def denial_watch(nc: NATS) -> DenialWatch:
    """The connection's watch, chained in front of its own error callback once."""
    watch = _WATCHES.get(nc)
    if watch is None:
        watch = DenialWatch()
        _WATCHES[nc] = watch
        previous: ErrorCallback = nc._error_cb

        async def chained(exc: Exception) -> None:
            await watch.record(exc)
            await previous(exc)

        nc._error_cb = chained
    return watch


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply envelope and the responder its subject names."""

    reply: dict[str, Any]
    responder: Responder

    @property
    def ok(self) -> bool:
        return self.reply.get("ok") is True


def _no_answer(what: str, wait_s: float) -> TasksError:
    return TasksError(
        ErrorCode.DEADLINE_EXCEEDED,
        f"no reply to {what} within {wait_s:g} s; whether it ran is unknown. Check the "
        "endpoint is being served in this space, then send it again (a write with the same "
        "envelope id)",
        outcome="unknown",
    )


async def exchange(
    nc: NATS,
    rail: CallerRail,
    subject: str,
    body: dict[str, Any],
    what: str,
    wait_s: float,
    *,
    token: str,
    repeat_s: float | None = None,
) -> Answer:
    """Publish ``body`` on ``subject`` and return the first reply that echoes its id.

    ``repeat_s`` re-publishes the same request until an answer comes (describe only: a
    read that an instance starting a moment later should still hear), and then replies
    that are not this request's (another endpoint's, a body that is not an envelope
    echoing the id) are ignored, so nobody can fail an honest describe by racing it.
    A command is stricter, as Cotal's ``epCall`` is: such a reply on its nonce is refused
    as ``internal`` (outcome unknown), never taken as the answer.
    """
    request_nonce = subject.rsplit(".", 1)[1]
    sentinel = rail.no_responders(request_nonce)
    watch = denial_watch(nc)
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    mark = watch.mark()
    try:
        sub = await nc.subscribe(rail.reply_filter(request_nonce))
    except NatsError as exc:
        raise TasksError(
            ErrorCode.UNAVAILABLE,
            f"cannot subscribe to the reply subject ({exc}). Check the connection "
            "and that this credential may subscribe to its reply rail",
            outcome="not-executed",
        ) from exc
    unserved: TasksError | None = None
    try:
        while True:
            await nc.publish(subject, data, reply=sentinel)
            await flush_queued(nc, max(1, int(deadline - loop.time())))
            _check_denied(watch, mark, subject, sub.subject, what)
            wait = deadline - loop.time()
            if repeat_s is not None:
                wait = min(wait, repeat_s)
            try:
                answer = await _first_reply(
                    sub,
                    _Expect(rail, token, request_nonce, sentinel, body["id"]),
                    wait,
                    strict=repeat_s is None,
                )
            except _Unserved as exc:
                if repeat_s is None:
                    raise exc.error from None
                unserved = exc.error  # describe asks again until an instance is up
                await asyncio.sleep(max(0.0, min(repeat_s, deadline - loop.time())))
                answer = None
            if answer is not None:
                return answer
            if repeat_s is None or loop.time() >= deadline:
                # A refusal read after the flush still says nothing reached the endpoint:
                # report it, so the caller does not send the refused request again.
                _check_denied(watch, mark, subject, sub.subject, what)
                raise unserved or _no_answer(what, wait_s)
    except NatsError as exc:
        raise TasksError(
            ErrorCode.UNAVAILABLE,
            f"the connection failed while sending {what} ({type(exc).__name__}); whether it "
            "ran is unknown. Reconnect, then retry with the same envelope id",
            outcome="unknown",
        ) from exc
    finally:
        await sub.unsubscribe()


async def carried(nc: NATS, subject: str, body: dict[str, Any], wait_s: float) -> bool:
    """Publish ``body``, a cast (``replyExpected: false``), on ``subject`` and tell whether
    the broker carried it: ``False`` when it refused the publish. A cast is never answered,
    so nothing comes back either way; the flush says what the broker made of it."""
    watch = denial_watch(nc)
    mark = watch.mark()
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    try:
        await nc.publish(subject, data)
        await flush_queued(nc, max(1, int(wait_s)))
    except NatsError as exc:
        raise TasksError(
            ErrorCode.UNAVAILABLE,
            f"the connection failed while asking the broker about {subject} "
            f"({type(exc).__name__}). Reconnect, then try again",
            outcome="not-executed",
        ) from exc
    return not watch.denied(mark, "publish", subject)


def _check_denied(watch: DenialWatch, mark: int, subject: str, rail: str, what: str) -> None:
    if watch.denied(mark, "subscription", rail):
        raise TasksError(
            ErrorCode.PERMISSION_DENIED,
            f"the broker refused this seat's reply subscription for {what}; the credential "
            "lacks the reply-read row. Ask the operator for the seat's grants",
            outcome="not-executed",
        )
    if watch.denied(mark, "publish", subject):
        raise TasksError(
            ErrorCode.PERMISSION_DENIED,
            f"the broker refused to carry {what}: this seat's credential does not allow "
            "publishing it (nothing reached the endpoint). Ask the operator to grant the "
            "command's capability",
            outcome="not-executed",
        )


class _Unserved(Exception):
    """The broker's no-responders answer: nothing subscribes to the request subject."""

    def __init__(self, error: TasksError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True, slots=True)
class _Expect:
    rail: CallerRail
    token: str
    nonce: str
    sentinel: str
    request_id: str


def _bad_reply(what: str) -> TasksError:
    return TasksError(
        ErrorCode.INTERNAL,
        f"{what}; the reply is refused, and whether the command ran is unknown. Report it "
        "to the endpoint's operator",
        outcome="unknown",
    )


async def _first_reply(sub: Any, expect: _Expect, wait_s: float, *, strict: bool) -> Answer | None:
    """The first reply for this request within ``wait_s``; ``None`` on silence."""
    loop = asyncio.get_running_loop()
    until = loop.time() + wait_s
    while True:
        left = until - loop.time()
        if left <= 0:
            return None
        try:
            msg: Msg = await sub.next_msg(timeout=left)
        except TimeoutError:
            return None
        if msg.subject == expect.sentinel:
            if msg.headers and msg.headers.get("Status") == "503":
                raise _Unserved(
                    TasksError(
                        ErrorCode.UNAVAILABLE,
                        f"no instance of the endpoint is serving in space {expect.rail.space}. "
                        "Start it (cotal-tasks serve) or check the space and endpoint names",
                        outcome="not-executed",
                    )
                )
            continue  # nothing but the broker may address the sentinel
        answer = _attributed(msg, expect)
        if isinstance(answer, Answer):
            return answer
        if strict and answer is not None:
            raise _bad_reply(answer)


def _attributed(msg: Msg, expect: _Expect) -> Answer | str | None:
    """The reply as an answer, or why it is not this request's (``None``: not on its rail)."""
    responder = expect.rail.parse_reply(msg.subject, expect.nonce)
    if responder is None:
        return None
    if responder.endpoint_token != expect.token:
        return f"a reply came from endpoint token {responder.endpoint_token}, not {expect.token}"
    try:
        reply = json.loads(msg.data)
    except ValueError:
        return "the reply body is not JSON"
    if not isinstance(reply, dict) or reply.get("v") != 1 or not isinstance(reply.get("ok"), bool):
        return "the reply is not a v1 reply envelope"
    if reply.get("id") != expect.request_id:
        return "the reply does not echo the request id"
    return Answer(reply, responder)
