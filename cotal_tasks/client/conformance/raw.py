"""Requests the client would never send, written by hand on the runner's connection.

A check that needs the endpoint's own answer to something the client refuses itself (an
untargeted self-mode command) builds the subject and envelope here, pinning the digests
and the bind of the contract the client resolved, and reads the reply on the caller's rail.
"""

from __future__ import annotations

import json

from nats.errors import TimeoutError as NatsTimeout

from cotal_tasks.client.conformance.context import Context, Failed, Json
from cotal_tasks.client.subjects import seat_tokens
from cotal_tasks.client.wire import new_id, nonce


async def raw_exchange(
    ctx: Context,
    who: str,
    command: str,
    body: Json,
    *,
    mode: str | None = None,
) -> tuple[str, Json]:
    """Send ``body`` for ``command`` as ``who``; return (reply subject, reply envelope)."""
    actor = ctx.actor(who)
    request_nonce = nonce()
    parts = [ctx.prefix, "ep", "one", ctx.token, command]
    if mode is not None:
        parts.append(mode)
    parts += [seat_tokens(actor.seat), request_nonce]
    reply_filter = f"{ctx.prefix}.ep.reply.*.*.*.{seat_tokens(actor.seat)}.{request_nonce}"
    sub = await actor.nc.subscribe(reply_filter)
    try:
        await actor.nc.publish(".".join(parts), json.dumps(body).encode())
        try:
            msg = await sub.next_msg(timeout=ctx.timeout)
        except (TimeoutError, NatsTimeout) as exc:
            raise Failed(f"{command} sent by hand was not answered") from exc
    finally:
        await sub.unsubscribe()
    reply: Json = json.loads(msg.data)
    return msg.subject, reply


async def envelope(ctx: Context, who: str, command: str, args: Json | None) -> Json:
    """A well-formed envelope for ``command`` as ``who``, pinned to the resolved contract."""
    client = ctx.client(who)
    service = await client.service()
    body: Json = {
        "v": 1,
        "id": new_id(),
        "op": {"endpoint": ctx.endpoint, "command": command},
        "class": "ephemeral",
        "replyExpected": True,
        "deadlineMs": int(ctx.timeout * 1000),
        "from": {"id": client.seat.principal, "name": "conformance"},
    }
    if command != "describe":
        row = service.commands[command]
        body["op"].update(inputDigest=row.input_digest, outputDigest=row.output_digest)
        body["bind"] = service.bind()
    if args is not None:
        body["args"] = args
    return body


async def raw_call(
    ctx: Context, who: str, command: str, args: Json | None, *, mode: str | None = None
) -> Json:
    """The endpoint's reply to a well-formed ``command`` sent by hand in ``mode``."""
    body = await envelope(ctx, who, command, args)
    _, reply = await raw_exchange(ctx, who, command, body, mode=mode)
    return reply
