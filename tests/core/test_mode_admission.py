"""Mode admission per the command table: one rule for the service, the wire and the client."""

from __future__ import annotations

import pytest

from cotal_tasks.core import COMMANDS, ErrorCode
from cotal_tasks.core.commands import mode_refusal


@pytest.mark.parametrize(
    ("command", "mode", "target_given", "target_is_caller", "code"),
    [
        ("list-tasks", None, False, False, None),
        ("list-tasks", "self", False, False, ErrorCode.PERMISSION_DENIED),
        ("list-tasks", None, True, False, ErrorCode.PERMISSION_DENIED),
        ("claim-task", "self", False, False, None),
        ("claim-task", "self", True, True, None),
        ("claim-task", "self", True, False, ErrorCode.TARGET_MISMATCH),
        ("claim-task", "any", True, False, ErrorCode.PERMISSION_DENIED),
        ("claim-task", None, False, False, ErrorCode.PERMISSION_DENIED),
        ("bind-task", "owner", True, False, None),
        ("bind-task", "any", False, False, ErrorCode.BAD_REQUEST),
        ("bind-task", "self", False, False, ErrorCode.PERMISSION_DENIED),
    ],
)
def test_mode_refusal(
    command: str,
    mode: str | None,
    target_given: bool,
    target_is_caller: bool,
    code: ErrorCode | None,
) -> None:
    spec = COMMANDS[command]
    refusal = mode_refusal(
        command, spec.modes, mode, target_given=target_given, target_is_caller=target_is_caller
    )
    if code is None:
        assert refusal is None
        return
    assert refusal is not None
    assert refusal.code == code
    what, _, remedy = refusal.message.partition(". ")
    assert what.startswith(command)
    assert remedy
