"""The tower-do parts of an opened endpoint (its store and follower), for the tests."""

from __future__ import annotations

from cotal_tasks.bridge.wiring import Endpoint
from cotal_tasks.providers.tower_do import TowerDo


def tower_of(endpoint: Endpoint) -> TowerDo:
    assert isinstance(endpoint.parts, TowerDo), "not a tower-do endpoint"
    return endpoint.parts
