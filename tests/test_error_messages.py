"""Every error message the package writes names its remedy: ``<what went wrong>. <what
to do next>``.

The check reads the package's source: each construction of a refusal (``ContractError``
and its client subclass, the client's ``usage_error``, click's usage errors, and the
errors that stop the bridge: a runtime, broker, space or lease failure) whose message
is a literal or an f-string must hold a sentence break followed by a capitalised next
step. A placeholder counts as that next step only where it forwards another checked
message (``{exc.message}``) or is named for it (``{remedy}``). A message built entirely
elsewhere (a variable) is checked where that text is written.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import cotal_tasks

PACKAGE = Path(cotal_tasks.__file__).parent
# Constructor name -> the index of its message argument.
REFUSALS = {
    "ContractError": 1,
    "TasksError": 1,
    "usage_error": 0,
    "UsageError": 0,
    "BadParameter": 0,
    "ClickException": 0,
    "RuntimeError": 0,
    "BrokerError": 0,
    "SpaceNotSetUp": 0,
    "LeaseTimeout": 0,
}
REMEDY = re.compile(r"\. [A-Z]")
FORWARDED = "<forwarded>. Remedy"


def _part(value: ast.expr) -> str:
    if isinstance(value, ast.Constant):
        return str(value.value)
    if isinstance(value, ast.FormattedValue):
        inner = value.value
        if isinstance(inner, ast.Attribute) and inner.attr == "message":
            return FORWARDED
        if isinstance(inner, ast.Name) and inner.id == "remedy":
            return "Remedy"
    return "{}"


def message_text(node: ast.expr) -> str | None:
    """The message as written, placeholders shown as ``{}``; None when nothing is literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_part(value) for value in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message_text(node.left), message_text(node.right)
        if left is None and right is None:
            return None
        return (left or "{}") + (right or "{}")
    return None


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def refusal_messages(source: str) -> list[tuple[int, str]]:
    """Each refusal construction's line and literal message text in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or (name := _called(node)) not in REFUSALS:
            continue
        index = REFUSALS[name]
        arg = node.args[index] if len(node.args) > index else None
        if arg is None:
            arg = next((k.value for k in node.keywords if k.arg == "message"), None)
        text = None if arg is None else message_text(arg)
        if text is not None:
            found.append((node.lineno, text))
    return found


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_check_sees_the_package_refusals() -> None:
    counted = sum(len(refusal_messages(path.read_text())) for path in _sources())
    assert counted > 100


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ('raise ContractError(ErrorCode.CONFLICT, "it is taken; retry")', False),
        ('raise ContractError(ErrorCode.CONFLICT, f"{x} is taken. Retry")', True),
        ('raise usage_error(f"{what}: {exc.message}")', True),
        ('raise click.BadParameter("not JSON", param_hint="--args")', False),
        ("raise ContractError(code, message)", None),
    ],
)
def test_the_check_tells_a_remedy_from_none(source: str, named: bool | None) -> None:
    found = refusal_messages(source)
    if named is None:
        assert found == []
    else:
        ((_, text),) = found
        assert bool(REMEDY.search(text)) is named


def test_every_refusal_message_names_its_remedy() -> None:
    missing = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in _sources()
        for line, text in refusal_messages(path.read_text())
        if not REMEDY.search(text)
    ]
    assert missing == [], "write these as '<what went wrong>. <what to do next>':\n" + "\n".join(
        missing
    )
