"""The one reading of a presence card, shared by the bind check and the dashboard."""

from __future__ import annotations

import pytest

from cotal_tasks.core.presence import PRESENCE_TTL_MS, PresenceCard, read_presence_card

NOW = 1_780_000_000_000
KEY = "local.builder"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"card": {"id": "local.builder"}, "ts": true}', PresenceCard(None, None, False)),
        (
            b'{"card": {"id": "local.builder"}, "lifecycleUid": "u", "ts": %d, '
            b'"status": "offline"}' % NOW,
            PresenceCard("u", NOW, False),
        ),
        (
            b'{"card": {"id": "local.builder"}, "ts": %d}' % (NOW - PRESENCE_TTL_MS - 1),
            PresenceCard(None, NOW - PRESENCE_TTL_MS - 1, False),
        ),
        (
            b'{"card": {"id": "local.builder"}, "ts": %d, "environment": "prod"}' % NOW,
            PresenceCard(None, NOW, True, "prod"),
        ),
        (
            b'{"card": {"id": "local.builder"}, "ts": %d, "environment": 3}' % NOW,
            PresenceCard(None, NOW, True, None, environment_ignored=True),
        ),
        (b'{"card": {"id": "local.reviewer"}, "ts": 1}', None),
    ],
)
def test_read_presence_card(raw: bytes, expected: PresenceCard | None) -> None:
    assert read_presence_card(KEY, raw, NOW) == expected
