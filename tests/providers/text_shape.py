"""The round trip of a tracker text's line structure, shared by the GitHub, GitLab and Jira
tests: an issue body with a paragraph and line breaks becomes a brief the contract admits
(U+2029 and U+2028, no control character), an agent's tool answer and the core reading
give it back as line breaks, and a seat's new brief and note reach the tracker as its own
line breaks; the echo of that write reads back as the brief the seat sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cotal_tasks.bridge.agents.tools import ToolResult
from cotal_tasks.core import Seat, Task, line_breaks
from tests.providers.hosted_support import HostedEndpoint

# What a person wrote on the tracker, and the brief the contract carries for it.
BODY = "Steps to reproduce:\n\n1. open 7\n2. see it fail"
BRIEF = "Steps to reproduce:\u20291. open 7\u20282. see it fail"
# What a seat writes back, and the text the tracker should hold for it.
NEW_BRIEF = "Fixed by:\u2029- a parser change\u2028- a test"
NEW_BODY = "Fixed by:\n\n- a parser change\n- a test"
NOTE = "Done.\u2028Checked by hand."
NOTE_TEXT = "Done.\nChecked by hand."


async def round_trip(
    endpoint: HostedEndpoint[Any],
    number: int,
    seat: Seat,
    tracker_text: Callable[[], tuple[Any, Any]],
    expected: tuple[Any, Any] = (NEW_BODY, NOTE_TEXT),
) -> None:
    """Read issue ``number`` (its body ``BODY`` in the tracker's form) as a task, then
    write ``NEW_BRIEF`` and ``NOTE`` as ``seat``: ``tracker_text`` answers the issue's
    body and its last comment (the write's mark left out), and they are ``expected``."""
    await endpoint.poll()
    task = await endpoint.get(number)
    assert task["brief"] == BRIEF
    Task.model_validate(task)  # TaskText admits it: no control character
    assert line_breaks(task["brief"]) == BODY
    shown = json.loads(ToolResult(data=task).text)  # what an agent's tool call reads
    assert shown["brief"] == BODY

    task_id = task["taskId"]
    await endpoint.client.claim(seat, task_id)
    updated = await endpoint.client.update(seat, task_id, brief=NEW_BRIEF, note=NOTE)
    assert updated["brief"] == NEW_BRIEF
    assert tracker_text() == expected

    await endpoint.poll()  # the echo reads back as what the seat sent
    assert (await endpoint.get(number))["brief"] == NEW_BRIEF
