"""Which endpoint ``sync`` and ``check-config --preview`` work on: one that mirrors a source
outside the bridge (a hosted tracker, a tower-do board file). Without ``--endpoint`` the
config's only such endpoint is taken; otherwise, and for an endpoint that is its own
source (a board), the refusal lists the endpoints the command can take."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig


def mirroring_endpoint(config: BridgeConfig, name: str | None, command: str) -> EndpointConfig:
    """The endpoint ``command`` (``sync``, ``--preview``) works on, or a usage error."""
    from cotal_tasks.providers.registry import provider

    mirroring = [ep for ep in config.endpoints if provider(ep.provider).mirrors]
    names = ", ".join(ep.name for ep in mirroring)
    if name is not None:
        target = config.endpoint(name)  # an unknown name: not-found, naming them all
        if target in mirroring:
            return target
        why = f"{target.name} is a {target.provider} endpoint, its own source"
    elif len(mirroring) == 1:
        return mirroring[0]
    elif mirroring:
        raise click.UsageError(
            f"the config has {len(mirroring)} endpoints {command} can take. Name one with "
            f"--endpoint: {names}"
        )
    else:
        why = "the config names no hosted tracker or tower-do board"
    if not mirroring:
        raise click.UsageError(
            f"{why}, and {command} works on an endpoint that mirrors a tracker or a board "
            "file. Add one to the config (docs/operations.md)"
        )
    raise click.UsageError(
        f"{why}, and {command} works on an endpoint that mirrors a tracker or a board file. "
        f"Name one with --endpoint: {names}"
    )
