"""Write-back through a Jira workflow: the assignee, the transition to the status a
change asks for (discovered per issue, never guessed), labels, the description and a
comment. Refusals are raised before anything is sent where Jira's own answers say the
write cannot succeed (a person is assigned, no transition leads there, the transition's
screen requires a field the bridge has no value for)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_str, at_path
from cotal_tasks.providers.hosted.http import RefusedBeforeSending, TrackerHttpError
from cotal_tasks.providers.hosted.tracker import TrackerChange
from cotal_tasks.providers.hosted.writeback import strip_marker
from cotal_tasks.providers.jira import adf
from cotal_tasks.providers.jira.config import JiraConfig
from cotal_tasks.providers.jira.mapping import IN_PROGRESS

_MARK = re.compile(r"<!-- cotal-tasks:write ([0-9a-f]{8,64}) -->\s*$")
REFUSED = 422  # the contract's failed-precondition: nothing was sent


@dataclass(frozen=True, slots=True)
class Target:
    """Where a change asks the issue to stand: a status category, a status name (``None``:
    any status of the category) and a resolution (``None``: any)."""

    category: str
    name: str | None
    resolution: str | None
    setting: str  # the config key that names the status, for a refusal's remedy

    def holds(self, fields: Mapping[str, Any]) -> bool:
        category = as_str(at_path(fields, "status", "statusCategory", "key"))
        name = as_str(at_path(fields, "status", "name")) or ""
        resolution = as_str(at_path(fields, "resolution", "name"))
        return (
            category == self.category
            and (self.name is None or name.casefold() == self.name.casefold())
            and (self.resolution is None or resolution == self.resolution)
        )

    def wanted(self) -> str:
        return repr(self.name) if self.name else f"the {self.category!r} category"


def target_of(change: TrackerChange, config: JiraConfig, category: str | None) -> Target | None:
    """The status ``change`` asks for, given the issue's current status category."""
    if change.state == "closed":
        return Target("done", config.done_status, change.state_reason, "done_status")
    if change.state == "open":
        return Target("new", config.open_status, None, "open_status")
    if IN_PROGRESS in change.add_labels:
        return Target("indeterminate", config.claimed_status, None, "claimed_status")
    released = IN_PROGRESS in change.remove_labels and config.blocked_label not in change.add_labels
    unassigned = (
        bool(change.unassign) and not change.assign and IN_PROGRESS not in change.add_labels
    )
    if (released or unassigned) and category == "indeterminate" and not _blocking(change, config):
        return Target("new", config.open_status, None, "open_status")
    return None


def _blocking(change: TrackerChange, config: JiraConfig) -> bool:
    return config.blocked_label is not None and config.blocked_label in change.add_labels


def refused(message: str, key: str, what: str = "transitions") -> TrackerHttpError:
    return RefusedBeforeSending(REFUSED, message, method="POST", path=f"{key}/{what}")


def _field_name(field: str, meta: Mapping[str, Any]) -> str:
    return as_str(meta.get("name")) or field


def pick_transition(
    transitions: Sequence[Any], target: Target, key: str, status: str
) -> tuple[str, dict[str, Any]]:
    """The transition to ``target`` and the fields its screen needs; else a refusal naming
    why. With a resolution asked for (``done``, ``dropped``), the first into the category is
    not enough: a workflow's "Won't do" leads into Done as well and resolves on its own. So
    the transition taken is one whose screen sets the resolution, else one named for it
    (a "Done" transition resolving Done); one that leaves the resolution to the workflow
    under another name is refused, never taken on a guess."""
    offered: list[str] = []
    fitting: list[tuple[str, Mapping[str, Any], str]] = []
    for item in transitions:
        transition = as_dict(item)
        to = as_dict(transition.get("to"))
        to_name = as_str(to.get("name")) or ""
        offered.append(f"{as_str(transition.get('name'))} → {to_name}")
        category = as_str(at_path(to, "statusCategory", "key"))
        if category != target.category or transition.get("isAvailable") is False:
            continue
        if target.name is not None and to_name.casefold() != target.name.casefold():
            continue
        if (tid := as_str(transition.get("id"))) is not None:
            fitting.append((tid, transition, to_name))
    listed = ", ".join(offered) or "none"
    if not fitting:
        raise refused(
            f"the workflow offers {key} no transition from {status!r} to {target.wanted()} "
            f"(it offers: {listed}). Set {target.setting} to a status the workflow reaches "
            "from there, or move the issue in Jira",
            key,
        )
    resolution = target.resolution
    if resolution is None:
        tid, transition, to_name = fitting[0]
        return tid, _screen_fields(transition, target, key, to_name)
    on_screen = [f for f in fitting if "resolution" in as_dict(f[1].get("fields"))]
    chosen = next((f for f in on_screen if _offers(f[1], resolution)), None)
    chosen = chosen or next((f for f in fitting if _named_for(f, resolution)), None)
    if chosen is None and on_screen:
        chosen = on_screen[0]  # its screen does not offer the resolution: refused below
    if chosen is None:
        raise refused(
            f"no transition of {key} from {status!r} into {target.wanted()} sets the "
            f"resolution {resolution!r}: those the workflow offers ({listed}) leave it to "
            'the workflow, which may resolve another way (a "Won\'t do" leads into Done '
            "too). Put the Resolution field on the screen of the transition that resolves "
            "that way, set done_status to its status, or move the issue in Jira",
            key,
        )
    tid, transition, to_name = chosen
    return tid, _screen_fields(transition, target, key, to_name)


def _offers(transition: Mapping[str, Any], resolution: str) -> bool:
    """Whether the transition's screen lets the bridge set ``resolution``."""
    meta = as_dict(as_dict(transition.get("fields")).get("resolution"))
    allowed = [as_str(as_dict(v).get("name")) for v in as_list(meta.get("allowedValues"))]
    return not allowed or resolution in allowed


def _named_for(fitting: tuple[str, Mapping[str, Any], str], resolution: str) -> bool:
    """Whether a transition without the resolution on its screen is named for it: the
    resolution its workflow sets. Its own name only: a "Won't do" leads into a status named
    Done as well."""
    return _plain(as_str(fitting[1].get("name")) or "") == _plain(resolution)


def _plain(name: str) -> str:
    return name.replace("\u2019", "'").strip().casefold()


def _screen_fields(
    transition: Mapping[str, Any], target: Target, key: str, to_name: str
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    name = as_str(transition.get("name"))
    for field, raw in as_dict(transition.get("fields")).items():
        meta = as_dict(raw)
        if field == "resolution" and target.resolution is not None:
            allowed = [as_str(as_dict(v).get("name")) for v in as_list(meta.get("allowedValues"))]
            if allowed and target.resolution not in allowed:
                raise refused(
                    f"the transition {name!r} of {key} offers no resolution "
                    f"{target.resolution!r} (it offers: {', '.join(a or '?' for a in allowed)}). "
                    "Set done_resolution or dropped_resolution to one of those",
                    key,
                )
            fields["resolution"] = {"name": target.resolution}
            continue
        if meta.get("required") is True and meta.get("hasDefaultValue") is not True:
            raise refused(
                f"the transition {name!r} of {key} to {to_name!r} requires "
                f"{_field_name(field, meta)!r} on its screen, which the bridge has no value "
                "for. Make the field optional or give it a default on that screen, or move "
                "the issue in Jira",
                key,
            )
    return fields


def label_update(change: TrackerChange) -> list[dict[str, str]]:
    """The Jira label operations of ``change`` (the claim mark is never a Jira label)."""
    ops = [{"add": label} for label in change.add_labels if label != IN_PROGRESS]
    return ops + [{"remove": label} for label in change.remove_labels if label != IN_PROGRESS]


def marked_text(text: str) -> tuple[str | None, str | None]:
    """A text as written, and the write's mark carried at its end (if any). Jira shows
    what it stores, so the mark travels as an entity property instead of the text."""
    match = _MARK.search(text)
    return strip_marker(text), match.group(1) if match else None


def document(text: str | None) -> dict[str, Any] | None:
    return None if text is None else adf.from_text(text)
