"""The first contact with each tracker at start: one listing request (the provider's
``reach``: the newest page of its listing, no issue read on its own and no evidence asked),
within ``tracker_connect_timeout_s``. A provider without one (a tower-do board, a file) is
not contacted at start: its follower reads it, and a board it cannot read makes the endpoint
not ready; ``check-config --online`` previews its newest item instead.

A tracker that does not answer in time stops the start with one line naming the endpoint's
``api_url``; one that answers with a refusal (a wrong token, no such repository) does not:
the endpoint then serves its mirror, not ready, and its sync keeps retrying (``/healthz``
says why). ``check-config --online`` makes the same contact and reports it.
"""

from __future__ import annotations

import asyncio
import contextlib

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.provider import SourceRefused
from cotal_tasks.providers.registry import provider


def api_url_key(config: BridgeConfig, endpoint: EndpointConfig) -> str:
    entry = provider(endpoint.provider)
    index = config.endpoints.index(endpoint)
    return f"endpoints.{index}.{entry.section or entry.name}.api_url"


async def first_contact(config: BridgeConfig, endpoint: EndpointConfig) -> int:
    """One listing request to ``endpoint``'s tracker; the items it listed. ``unavailable``
    naming ``api_url`` when the tracker does not answer within the deadline; a refusal
    raises the source's ``SourceRefused`` with its status."""
    entry = provider(endpoint.provider)
    deadline = config.tracker_connect_timeout_s
    try:
        if entry.reach is not None:
            return await asyncio.wait_for(entry.reach(endpoint.settings), deadline)
        if entry.preview is None:
            return 0
        shown = await asyncio.wait_for(entry.preview(endpoint.settings, config.space, 1), deadline)
    except TimeoutError as exc:
        why = f"no answer within {deadline:g} s, tracker_connect_timeout_s"
        raise _unreached(config, endpoint, why) from exc
    except SourceRefused as exc:
        if exc.status is None:
            raise _unreached(config, endpoint, exc.message) from exc
        raise
    return len(shown)


async def reach_trackers(config: BridgeConfig) -> None:
    """``first_contact`` with every tracker, together; a refusal is left to the sync."""

    async def one(endpoint: EndpointConfig) -> None:
        # A refusal is an answer: the sync reports it, and readiness shows it.
        with contextlib.suppress(SourceRefused):
            await first_contact(config, endpoint)

    trackers = [ep for ep in config.endpoints if provider(ep.provider).reach is not None]
    await asyncio.gather(*(one(endpoint) for endpoint in trackers))


def _unreached(config: BridgeConfig, endpoint: EndpointConfig, why: str) -> ContractError:
    key = api_url_key(config, endpoint)
    return ContractError(
        ErrorCode.UNAVAILABLE,
        f"cannot reach the tracker of endpoint {endpoint.name} ({why}). Check {key} and "
        "the network",
    )
