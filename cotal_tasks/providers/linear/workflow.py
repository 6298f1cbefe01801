"""Write-back on Linear, planned from what the issue holds before anything is sent: the
workflow state a change asks for (the team's own states, by type and position, never
guessed), the labels it names (by id), and who it gives the issue to.

A seat's account is a Linear user or an agent (an app user). A claim by an agent's
seat *delegates* the issue to it: a person assigned stays assigned. A claim by a
user's seat assigns it. A claim never replaces a person's assignment or another
agent's delegation (refused, nothing sent), and a release takes back only the seat's
own account. The whole change is one ``issueUpdate``; a note is a comment after it, or,
where the token is an agent's (an ``actor=app`` OAuth token) and the issue is delegated
to that agent, an activity of the agent's session on the issue (``agent_session``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_str, at_path
from cotal_tasks.providers.hosted.http import RefusedBeforeSending, TrackerHttpError
from cotal_tasks.providers.hosted.tracker import TrackerChange
from cotal_tasks.providers.linear.config import LinearConfig
from cotal_tasks.providers.linear.mapping import STARTED

REFUSED = 422  # the contract's failed-precondition: nothing was sent


@dataclass(frozen=True, slots=True)
class Target:
    """Where a change asks the issue to stand: a state type and, if configured, a name."""

    kind: str
    name: str | None
    setting: str  # the config key that names the state, for a refusal's remedy

    def holds(self, state: Mapping[str, Any]) -> bool:
        name = as_str(state.get("name")) or ""
        return as_str(state.get("type")) == self.kind and (
            self.name is None or name.casefold() == self.name.casefold()
        )


def refused(message: str, identifier: str) -> TrackerHttpError:
    return RefusedBeforeSending(REFUSED, message, method="POST", path=f"issueUpdate {identifier}")


def target_of(change: TrackerChange, config: LinearConfig, kind: str | None) -> Target | None:
    """The state ``change`` asks for, given the type of the issue's state now."""
    if change.state == "closed":
        if change.state_reason == "canceled":
            return Target("canceled", config.dropped_state, "dropped_state")
        return Target("completed", config.done_state, "done_state")
    if change.state == "open":
        return Target("unstarted", config.open_state, "open_state")
    if STARTED in change.add_labels:
        return Target("started", config.claimed_state, "claimed_state")
    blocking = config.blocked_label is not None and config.blocked_label in change.add_labels
    released = STARTED in change.remove_labels
    unassigned = bool(change.unassign) and not change.assign
    if (released or unassigned) and kind == "started" and not blocking:
        return Target("unstarted", config.open_state, "open_state")
    return None


def pick_state(states: Sequence[Any], target: Target, identifier: str) -> str:
    """The id of the team's first state (by position) that ``target`` names."""
    fitting = [
        as_dict(s) for s in states if as_str(as_dict(s).get("id")) and target.holds(as_dict(s))
    ]
    if not fitting:
        offered = ", ".join(
            f"{as_str(as_dict(s).get('name'))} ({as_str(as_dict(s).get('type'))})" for s in states
        )
        wanted = repr(target.name) if target.name else f"a {target.kind} state"
        raise refused(
            f"the team of {identifier} has no {wanted} (it has: {offered or 'none'}). Set "
            f"{target.setting} to one of its states, or move the issue in Linear",
            identifier,
        )

    def position(state: Mapping[str, Any]) -> float:
        value = state.get("position")
        return float(value) if isinstance(value, (int, float)) else 0.0

    fitting.sort(key=position)
    return str(fitting[0]["id"])


def label_ids(
    change: TrackerChange,
    found: Sequence[Any],
    held: Sequence[Any],
    team: str | None,
    identifier: str,
) -> tuple[list[str], list[str]]:
    """The ids of the labels ``change`` adds (the team's own, else a workspace label of
    that name) and removes (those the issue carries); a label to add that Linear does
    not have is refused, nothing sent."""
    added: list[str] = []
    for name in (label for label in change.add_labels if label != STARTED):
        named = [
            as_dict(n)
            for n in found
            if (as_str(as_dict(n).get("name")) or "").casefold() == name.casefold()
        ]
        named.sort(key=lambda n: as_str(at_path(n, "team", "id")) != team)
        usable = [n for n in named if as_str(at_path(n, "team", "id")) in (team, None)]
        if not usable or not as_str(usable[0].get("id")):
            raise refused(
                f"Linear has no label {name!r} for the team of {identifier}. Create it in "
                "Linear (a workspace label, or one of the team), or change blocked_label",
                identifier,
            )
        added.append(str(usable[0]["id"]))
    removing = {label.casefold() for label in change.remove_labels if label != STARTED}
    removed = [
        str(as_dict(n)["id"])
        for n in held
        if (as_str(as_dict(n).get("name")) or "").casefold() in removing
        and as_str(as_dict(n).get("id"))
    ]
    return added, removed


def assignment(
    change: TrackerChange, issue: Mapping[str, Any], agent: bool, identifier: str
) -> dict[str, str | None]:
    """The ``assigneeId`` / ``delegateId`` part of the update (``agent``: the claiming
    account is an app user). A person's assignment and another agent's delegation are
    never replaced; a release clears only the seat's own account."""
    assignee = as_str(at_path(issue, "assignee", "id"))
    delegate = as_str(at_path(issue, "delegate", "id"))
    fields: dict[str, str | None] = {}
    for account in change.unassign:
        if delegate == account:
            fields["delegateId"] = None
        elif assignee == account:
            fields["assigneeId"] = None
    if change.assign:
        wanted = change.assign[0]
        key, held, who = (
            ("delegateId", delegate, "delegated to another agent")
            if agent
            else ("assigneeId", assignee, "assigned to someone else")
        )
        if held is not None and held != wanted and held not in change.unassign:
            raise refused(
                f"{identifier} is {who} in Linear, and a claim never replaces that. "
                "Unassign them in Linear, or claim another task",
                identifier,
            )
        if held != wanted:
            fields[key] = wanted
        else:
            fields.pop(key, None)
    return fields


def labels_named(change: TrackerChange) -> list[str]:
    return [label for label in change.add_labels if label != STARTED]


def states_of(issue: Mapping[str, Any]) -> list[Any]:
    return as_list(at_path(issue, "team", "states", "nodes"))


@dataclass(frozen=True, slots=True)
class Created:
    """An issue to create: its team (key and id), the labels it carries, and whether the
    configured project is an id."""

    team: str
    team_id: str
    labels: tuple[str, ...]
    project_by_id: bool


def scope_ids(data: Mapping[str, Any], config: LinearConfig, new: Created) -> dict[str, Any]:
    """The ``labelIds``, ``projectId``, ``cycleId`` and assignee or delegate a new issue
    needs to stay in ``config``'s scope, from what ``ScopeNeeds`` answered; refused where
    Linear has none."""
    needs: dict[str, Any] = {}
    where = f"a new issue of {new.team}"
    if new.labels:
        wanted = TrackerChange(add_labels=new.labels)
        found = as_list(at_path(data, "issueLabels", "nodes"))
        needs["labelIds"], _ = label_ids(wanted, found, [], new.team_id, where)
    if config.project is not None:
        found = as_list(at_path(data, "projects", "nodes"))
        project = config.project if new.project_by_id else _first_id(found)
        if project is None:
            raise refused(
                f"Linear has no project named {config.project!r}, which the scope names, so "
                "a created issue would leave it. Fix project, or create it in Linear",
                where,
            )
        needs["projectId"] = project
    if config.cycle is not None:
        active = as_str(at_path(data, "team", "activeCycle", "id"))
        numbered = as_list(at_path(data, "team", "cycles", "nodes"))
        cycle = active if config.cycle == "active" else _first_id(numbered)
        if cycle is None:
            raise refused(
                f"the team {new.team} has no cycle {config.cycle!r} now, which the scope "
                "names, so a created issue would leave it. Start the cycle in Linear, or "
                "change cycle",
                where,
            )
        needs["cycleId"] = cycle
    user = as_dict(data.get("user"))
    if account := as_str(user.get("id")):
        needs["delegateId" if user.get("app") is True else "assigneeId"] = account
    return needs


def agent_session(before: Mapping[str, Any]) -> str | None:
    """The agent session a note goes to as activity: the token is an app user's (the
    ``viewer`` is an app), the issue is delegated to it, and it has a session on the
    issue not dismissed (the latest; Linear opens one when the issue is delegated).
    ``None``: the note is a comment."""
    viewer = as_dict(before.get("viewer"))
    me = as_str(viewer.get("id"))
    issue = as_dict(before.get("issue"))
    if viewer.get("app") is not True or not me or as_str(at_path(issue, "delegate", "id")) != me:
        return None
    open_ = [
        as_str(as_dict(n).get("id"))
        for n in as_list(at_path(issue, "agentSessions", "nodes"))
        if as_str(at_path(n, "appUser", "id")) == me and not as_dict(n).get("dismissedAt")
    ]
    return next((sid for sid in reversed(open_) if sid), None)


def _first_id(nodes: Sequence[Any]) -> str | None:
    return as_str(as_dict(nodes[0]).get("id")) if nodes else None
