"""Who may read the HTTP listener, decided once from the config: the read API's tokens
(``auth.Tokens``), ``serve``'s banner and ``check-config`` all say what this says, so
none of them can call the dashboard open while it answers 401.

Four cases: the listener is off; bearer tokens are configured (each request sends one);
no token but the local reader applies (``[http] local_reader = true`` on a bridge that
runs its own embedded broker and listens on loopback: plainly local requests read); or
closed (every request answers 401). ``make run`` (``serve`` with no config file) turns
the local reader on; a config file opts in. It is off by default because a reverse proxy
on the same host makes every request it forwards look local.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cotal_tasks.bridge.config import BridgeConfig

State = Literal["off", "tokens", "loopback", "closed"]
_HOW_TO_OPEN = "add a [[http.tokens]] entry (docs/http.md)"


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (with or without brackets)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def local_reader_refused(config: BridgeConfig) -> str | None:
    """Why the local reader cannot apply to ``config`` (``None``: it can)."""
    if config.nats_url is not None:
        return "the bridge joins a broker (nats_url) rather than running its own"
    if not is_loopback_host(config.http.host):
        return f"the listener's host {config.http.host} is not a loopback address"
    return None


@dataclass(frozen=True, slots=True)
class Access:
    """What a request to the listener needs: ``state``, ``short`` (the banner's words)
    and ``detail`` (``check-config``'s sentence, with the remedy when it is closed)."""

    state: State
    short: str
    detail: str


def http_access(config: BridgeConfig) -> Access:
    """Who may read the dashboard and the read API of ``config``'s listener, and why."""
    http = config.http
    if not http.enabled:
        return Access("off", "off", "the HTTP listener is off ([http] enabled = false)")
    if http.tokens:
        n = len(http.tokens)
        return Access(
            "tokens",
            "send a bearer token from [[http.tokens]]; the page asks for one",
            f"the dashboard and the read API need a bearer token ({n} in [[http.tokens]])",
        )
    why_not = local_reader_refused(config)
    if http.local_reader and why_not is None:
        return Access(
            "loopback",
            "loopback: no token needed",
            "loopback requests read without a token ([http] local_reader, embedded broker, "
            "loopback listener); any other request answers 401",
        )
    if http.local_reader:
        reason = f"[http] local_reader is on, but {why_not}"
        remedy = _HOW_TO_OPEN
    elif why_not is None:
        reason = "no [[http.tokens]] are configured and [http] local_reader is off"
        remedy = (
            "add [http] local_reader = true to read on loopback without a token (only when "
            f"no proxy forwards to the listener), or {_HOW_TO_OPEN}"
        )
    else:
        reason = "no [[http.tokens]] are configured"
        remedy = _HOW_TO_OPEN
    return Access(
        "closed",
        f"closed: every request answers 401; {remedy}",
        f"the dashboard and the read API are closed: {reason}, so every request answers "
        f"401. To open them, {remedy}",
    )
