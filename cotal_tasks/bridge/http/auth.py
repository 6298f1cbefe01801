"""Who is calling the read API: bearer tokens from the config, or the local reader.

Each ``[[http.tokens]]`` entry names an environment variable holding the secret, read
once when the listener starts, and maps it to a principal, an optional lifecycle uid
and the capabilities it holds. A presented token is compared with every configured
secret in constant time (``hmac.compare_digest``, no early exit), and no secret, and no
presented token, is ever logged or echoed.

With no tokens configured the read API is closed (401, naming the remedy), with one
exception the operator opts into, the local reader (``[http] local_reader = true``, which
the embedded default, ``serve`` with no config file, sets): when the bridge runs its own
embedded broker and listens on a loopback address, a request from a loopback peer,
addressed to a loopback host name and carrying no proxy forwarding header, reads with
``tasks.read``. It is off
by default because a reverse proxy on the same host (``proxy_pass`` to 127.0.0.1, which
rewrites ``Host`` and adds no forwarding header) makes every request look local. That
reader sees
nothing the embedded broker beside it does not already give every local process (it
takes any command, unauthenticated, on loopback). The Host check stops a web page from
reaching the listener through DNS rebinding. ``my-tasks`` always needs a token, since
the local reader is no seat.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.http.access import http_access, is_loopback_host
from cotal_tasks.bridge.preflight import blocking, preflight
from cotal_tasks.core import ContractError, ErrorCode, Seat

log = logging.getLogger(__name__)

READ = "tasks.read"
SELF = "tasks.self"
LOCAL_ACTOR = "http_local"
# Reads take a caller triple; a reader without a lifecycle uid reads under this one.
# It only ever keys idempotency results of writes, and the read API writes nothing.
READER_UID = "0" * 26
_FORWARDING = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


@dataclass(frozen=True, slots=True)
class Grant:
    """An authenticated caller: its principal, lifecycle uid and capabilities."""

    principal: str
    lifecycle_uid: str | None
    capabilities: frozenset[str]
    local: bool = False

    def reader(self) -> Seat:
        """The caller triple a read runs under."""
        owner, _, actor = self.principal.partition(".")
        return Seat(owner, actor, self.lifecycle_uid or READER_UID)

    def seat(self) -> Seat:
        """The caller triple of a self-mode read: the token's principal and lifecycle uid."""
        if self.lifecycle_uid is None:
            raise ContractError(
                ErrorCode.PERMISSION_DENIED,
                f"the token of {self.principal} names no lifecycle_uid, so it is no seat and "
                "has no tasks of its own. Give its [[http.tokens]] entry a lifecycle_uid",
            )
        owner, _, actor = self.principal.partition(".")
        return Seat(owner, actor, self.lifecycle_uid)


def _host_name(header: str) -> str:
    """The host of a Host header, without its port."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Tokens:
    """The configured bearer tokens, and whether the local reader is admitted."""

    def __init__(self, entries: list[tuple[bytes, Grant]], *, local_reader: Grant | None) -> None:
        self._entries = entries
        self.local_reader = local_reader

    @property
    def configured(self) -> bool:
        return bool(self._entries)

    @classmethod
    def load(cls, config: BridgeConfig, environ: Mapping[str, str]) -> Tokens:
        """Read every token's secret from the environment; refuse a missing, weak or
        shared one (``preflight``'s findings: ``check-config`` reports the same)."""
        refused = [f for f in blocking(preflight(config, environ)) if f.key.startswith("http.")]
        if refused:
            raise ContractError(ErrorCode.FAILED_PRECONDITION, refused[0].message)
        entries = [
            (
                environ[token.token_env].encode(),
                Grant(token.principal, token.lifecycle_uid, frozenset(token.capabilities)),
            )
            for token in config.http.tokens
        ]
        local = None
        access = http_access(config)
        if access.state == "loopback":
            local = Grant(f"{config.owner}.{LOCAL_ACTOR}", None, frozenset({READ}), local=True)
            log.info("HTTP: %s, as %s (tasks.read)", access.detail, local.principal)
        elif access.state == "closed":
            log.warning("HTTP: %s", access.detail)
        return cls(entries, local_reader=local)

    def authenticate(self, request: Request) -> Grant:
        """The grant of the request's bearer token, or the local reader, or 401."""
        header = request.headers.get("authorization")
        if header is None:
            if self.local_reader is not None and _is_local(request):
                return self.local_reader
            raise ContractError(ErrorCode.UNAUTHENTICATED, self._missing())
        scheme, _, value = header.partition(" ")
        presented = value.strip().encode()
        if scheme.lower() != "bearer" or not presented:
            raise ContractError(
                ErrorCode.UNAUTHENTICATED,
                "the Authorization header is not 'Bearer <token>'. Send the token so",
            )
        match: Grant | None = None
        for secret, grant in self._entries:  # no early exit: the time does not tell which
            if hmac.compare_digest(secret, presented):
                match = grant
        if match is None:
            raise ContractError(
                ErrorCode.UNAUTHENTICATED,
                "the bearer token is not one this bridge knows. Check the token, or ask the "
                "operator to add it to [[http.tokens]]",
            )
        return match

    def _missing(self) -> str:
        if self._entries:
            return "send 'Authorization: Bearer <token>' with a token from [[http.tokens]]"
        if self.local_reader is not None:
            return (
                "no [[http.tokens]] are configured, and this request is not a local one "
                "(loopback peer and host, no proxy headers); configure a token to read "
                "from elsewhere"
            )
        return (
            "no [[http.tokens]] are configured, so the read API is closed; add one "
            '([[http.tokens]] token_env = "NAME", principal = "owner.actor", '
            'capabilities = ["tasks.read"]), export NAME, and restart the bridge (an '
            "embedded loopback bridge not behind a proxy may set [http] local_reader = true)"
        )


def require(grant: Grant, capability: str) -> None:
    """Refuse with 403 when ``grant`` lacks ``capability``."""
    if capability not in grant.capabilities:
        raise ContractError(
            ErrorCode.PERMISSION_DENIED,
            f"{grant.principal} does not hold {capability}. Add it to the token's "
            "capabilities in [[http.tokens]]",
        )


def _is_local(request: Request) -> bool:
    client = request.client
    if client is None or not is_loopback_host(client.host):
        return False
    if any(name in request.headers for name in _FORWARDING):
        return False
    return is_loopback_host(_host_name(request.headers.get("host", "")))
