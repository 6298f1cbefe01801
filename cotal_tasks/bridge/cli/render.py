"""How ``invoke`` shows a reply to a person: a table of a page of tasks (``list-tasks``,
``my-tasks``), a task as labelled lines (``get-task`` and every write), an error as one
line. Scripts get the reply envelope as JSON (``--json``, and whenever stdout is not a
terminal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

TITLE_WIDTH = 72


def _binding(task: Mapping[str, Any]) -> str:
    bound = task.get("binding")
    if not isinstance(bound, Mapping):
        return "-"
    return f"{bound.get('owner')}.{bound.get('actor')}/{bound.get('lifecycleUid')}"


def _clip(text: str, width: int) -> str:
    return text if not width or len(text) <= width else text[: width - 1] + "…"


def table(tasks: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per task under a header; the columns as wide as their widest cell, the
    title (last) cut at ``TITLE_WIDTH``."""
    rows = [("TASK", "STATUS", "BOUND TO", "TITLE")]
    rows += [
        (str(t.get("taskId")), str(t.get("status")), _binding(t), str(t.get("title", "")))
        for t in tasks
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)),
                   _clip(row[3], TITLE_WIDTH)])
        for row in rows
    ]  # fmt: skip


def task_lines(task: Mapping[str, Any]) -> list[str]:
    lines = [f"{task.get('taskId')}: {task.get('title', '')}"]
    source = task.get("statusSource")
    native = f"  (statusSource {source!r})" if source else ""
    lines.append(f"  status      {task.get('status')}{native}")
    lines.append(f"  bound to    {_binding(task)}")
    for key, label in (("brief", "brief"), ("stale", "stale")):
        if task.get(key):
            lines.append(f"  {label:<11} {task[key]}")
    for evidence in task.get("evidence") or ():
        lines.append(f"  evidence    {evidence.get('kind')}: {evidence.get('ref')}")
    return lines


def human(
    reply: Mapping[str, Any], echo: Callable[[str], None], refusal: Callable[[str], None]
) -> None:
    """``reply`` (an envelope) for a person: its data to ``echo``, a refusal as one line
    ``cotal-tasks: <code>: <message>`` to ``refusal``."""
    if not reply.get("ok"):
        error = reply.get("error") or {}
        refusal(f"cotal-tasks: {error.get('code')}: {error.get('message')}")
        return
    data = reply.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("tasks"), list):
        for line in table(data["tasks"]):
            echo(line)
        more = f", more after cursor {data.get('nextCursor')}" if data.get("nextCursor") else ""
        echo(f"({len(data['tasks'])} task(s), changeSeq {data.get('changeSeq')}{more})")
    elif isinstance(data, Mapping) and "taskId" in data:
        for line in task_lines(data):
            echo(line)
    else:
        import json

        echo(json.dumps(data, ensure_ascii=False, indent=2))
