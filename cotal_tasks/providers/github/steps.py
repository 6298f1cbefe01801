"""A planned write (``TrackerChange``) as GitHub's REST calls, in order: assignees, labels,
a reopen before a close with another reason, the issue's fields, the comment."""

from __future__ import annotations

from typing import Any

from cotal_tasks.providers.github.client import GitHubClient
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.tracker import Step, TrackerChange


def write_steps(client: GitHubClient, number: int, change: TrackerChange) -> list[Step]:
    """The writes that make ``change`` on issue ``number``, in order."""
    steps: list[Step] = []
    patch: dict[str, Any] = {}
    if change.body is not None:
        patch["body"] = change.body
    if change.state is not None:
        patch["state"] = change.state
        if change.state_reason is not None:
            patch["state_reason"] = change.state_reason
    if change.assign:
        logins = list(change.assign)

        async def assign() -> None:
            issue = await client.add_assignees(number, logins)
            held = {user.get("login") for user in issue.get("assignees") or ()}
            missing = [login for login in logins if login not in held]
            if missing:
                raise TrackerHttpError(
                    422,
                    f"GitHub did not assign {', '.join(missing)} (not a collaborator "
                    "with access to the repository?)",
                    method="POST",
                    path=f"/repos/{client.repo}/issues/{number}/assignees",
                )

        steps.append(("assign", assign))
    if change.unassign:
        steps.append(("unassign", lambda: client.remove_assignees(number, list(change.unassign))))
    if change.add_labels:
        steps.append(("labels", lambda: client.add_labels(number, list(change.add_labels))))
    for label in change.remove_labels:
        steps.append((f"unlabel {label}", _bind(client.remove_label, number, label)))
    if change.reclose and change.state == "closed":
        # GitHub takes a state_reason only with a change of state: reopen, then close.
        steps.append(("reopen", lambda: client.update_issue(number, {"state": "open"})))
    if patch:
        steps.append(("update", lambda: client.update_issue(number, patch)))
    if change.comment:
        steps.append(("comment", lambda: client.comment(number, change.comment or "")))
    return steps


def _bind(fn: Any, *args: Any) -> Any:
    return lambda: fn(*args)
