"""Webhook deliveries as GitLab sends them: the headers (``X-Gitlab-Token`` is the plain
shared secret, no HMAC) and payload builders for Issue Hook, Merge Request Hook and Note
Hook in the documented shapes (``webhook_events.md``). Build payloads from a
``FakeGitLab`` so the webhook and the REST API tell the same story::

    payload = issue_hook_payload(fake, "acme/widgets", 3, "update", previous_labels=["bug"])
    body, headers = gitlab_webhook(SECRET, payload)

Timestamps: ``changes`` carry ``2026-11-30 06:43:14 UTC`` (as live deliveries do);
``object_attributes`` use the same by default, or ISO 8601 with ``time_format="iso"``
(the style of the documented examples). A receiver should accept both.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tests.support.fake_gitlab_hook_shapes import STATE_ID, HookShapes
from tests.support.fake_gitlab_model import (
    JSON,
    MergeRequest,
    hook_time,
    iso,
)
from tests.support.fake_tracker import fake_sha

if TYPE_CHECKING:
    from tests.support.fake_gitlab_state import FakeGitLab

TimeFormat = Literal["utc", "iso"]
ISSUE_ACTIONS = frozenset({"open", "close", "reopen", "update"})
MR_ACTIONS = frozenset(
    {"open", "close", "reopen", "update", "merge", "approved", "unapproved", "approval"}
)
DEFAULT_WEBHOOK_UUID = "2f0c5bb5-0e4d-4f0b-9e3c-7a1f7d5b9c11"


def gitlab_webhook(
    token: str | None,
    payload: Mapping[str, Any] | bytes,
    event: str = "Issue Hook",
    *,
    event_uuid: str | None = None,
    idempotency_key: str | None = None,
    webhook_uuid: str = DEFAULT_WEBHOOK_UUID,
    instance: str = "https://gitlab.example.com",
    user_agent: str = "GitLab/18.4.0-ee",
) -> tuple[bytes, dict[str, str]]:
    """The raw body and headers of one delivery. ``token`` is the webhook's secret token
    (``None``: a webhook without one, no ``X-Gitlab-Token``). ``event_uuid`` and
    ``idempotency_key`` default to fresh UUIDs; pass the same ``idempotency_key`` again to
    model GitLab retrying a delivery."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": user_agent,
        "X-Gitlab-Event": event,
        "X-Gitlab-Webhook-UUID": webhook_uuid,
        "X-Gitlab-Instance": instance,
        "X-Gitlab-Event-UUID": event_uuid or str(uuid.uuid4()),
        "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
    }
    if token is not None:
        headers["X-Gitlab-Token"] = token
    return body, headers


def issue_hook_payload(
    fake: FakeGitLab,
    project: int | str,
    iid: int,
    action: str = "update",
    *,
    user: str | None = None,
    previous_labels: Sequence[str] | None = None,
    previous_assignees: Sequence[str] | None = None,
    previous_title: str | None = None,
    previous_description: str | None = None,
    previous_updated_at: int | None = None,
    changes: JSON | None = None,
    time_format: TimeFormat = "utc",
) -> JSON:
    """An Issue Hook for the issue's current state. ``action`` is open, close, reopen or
    update; close/reopen add ``state_id``/``closed_at`` changes; the ``previous_*``
    arguments add ``changes`` entries (``labels`` as label objects, ``assignees`` as
    users); ``changes`` is merged last. ``user`` (the actor) defaults to the closer on
    close, else the author. ``previous_updated_at`` is epoch ms."""
    if action not in ISSUE_ACTIONS:
        raise ValueError(f"unsupported issue action {action!r}")
    proj = fake.project(project)
    issue = proj.issues[iid]
    hooks = HookShapes(fake, time_format)
    actor = user or (issue.closed_by if action == "close" and issue.closed_by else issue.author)
    fake.add_user(actor)
    attrs = hooks.issue_attrs(issue) | {"action": action}
    attrs["updated_by_id"] = fake.users[actor].id if action != "open" else None
    diff: JSON = {}
    if action == "open":
        diff |= {
            "author_id": {"previous": None, "current": attrs["author_id"]},
            "created_at": {"previous": None, "current": hook_time(issue.created_ms)},
            "description": {"previous": None, "current": issue.description},
            "id": {"previous": None, "current": issue.id},
            "iid": {"previous": None, "current": issue.iid},
            "project_id": {"previous": None, "current": proj.id},
            "title": {"previous": None, "current": issue.title},
        }
    elif action in ("close", "reopen"):
        closing = action == "close"
        diff["state_id"] = {"previous": 1 if closing else 2, "current": 2 if closing else 1}
        closed = hook_time(issue.closed_ms) if issue.closed_ms is not None else None
        diff["closed_at"] = (
            {"previous": None, "current": closed}
            if closing
            else {
                "previous": hook_time(previous_updated_at or issue.created_ms),
                "current": None,
            }
        )
    if previous_labels is not None:
        diff["labels"] = {
            "previous": hooks.labels(proj, previous_labels),
            "current": hooks.labels(proj, issue.labels),
        }
    if previous_assignees is not None:
        for name in previous_assignees:
            fake.add_user(name)
        diff["assignees"] = {
            "previous": [hooks.user(a) for a in previous_assignees],
            "current": [hooks.user(a) for a in issue.assignees],
        }
    if previous_title is not None:
        diff["title"] = {"previous": previous_title, "current": issue.title}
    if previous_description is not None:
        diff["description"] = {"previous": previous_description, "current": issue.description}
    if action != "open":
        before = previous_updated_at if previous_updated_at is not None else issue.created_ms
        diff["updated_at"] = {
            "previous": hook_time(before),
            "current": hook_time(issue.updated_ms),
        }
        diff["updated_by_id"] = {"previous": None, "current": fake.users[actor].id}
    diff |= changes or {}
    payload = hooks.envelope(
        proj, "issue", "confidential_issue" if issue.confidential else "issue", actor
    ) | {
        "object_attributes": attrs,
        "labels": hooks.labels(proj, issue.labels),
        "changes": diff,
        "repository": hooks.repository(proj),
    }
    if issue.assignees:
        payload["assignees"] = [hooks.user(a) for a in issue.assignees]
    return payload


def merge_request_hook_payload(
    fake: FakeGitLab,
    project: int | str,
    iid: int,
    action: str = "open",
    *,
    user: str | None = None,
    changes: JSON | None = None,
    time_format: TimeFormat = "utc",
) -> JSON:
    """A Merge Request Hook for the MR's current state; its ``description`` carries the
    "Closes #N" that ``add_merge_request`` wrote, and ``head_pipeline_id`` its pipeline."""
    if action not in MR_ACTIONS:
        raise ValueError(f"unsupported merge request action {action!r}")
    proj = fake.project(project)
    mr: MergeRequest = proj.merge_requests[iid]
    hooks = HookShapes(fake, time_format)
    actor = user or (mr.merged_by if action == "merge" and mr.merged_by else mr.author)
    fake.add_user(actor)
    url = hooks.shapes.mr_web(proj, mr.iid)
    author = fake.users[mr.author]
    attrs: JSON = {
        "assignee_id": fake.users[mr.assignees[0]].id if mr.assignees else None,
        "author_id": author.id,
        "created_at": hooks.t(mr.created_ms),
        "description": mr.description,
        "draft": mr.draft,
        "head_pipeline_id": mr.head_pipeline.id if mr.head_pipeline else None,
        "id": mr.id,
        "iid": mr.iid,
        "last_edited_at": None,
        "last_edited_by_id": None,
        "merge_commit_sha": mr.merge_commit_sha,
        "merge_error": None,
        "merge_params": {"force_remove_source_branch": "1"},
        "merge_status": "can_be_merged",
        "merge_user_id": fake.users[mr.merged_by].id if mr.merged_by else None,
        "merge_when_pipeline_succeeds": False,
        "milestone_id": None,
        "source_branch": mr.source_branch,
        "source_project_id": proj.id,
        "state_id": STATE_ID[mr.state],
        "target_branch": mr.target_branch,
        "target_project_id": proj.id,
        "time_estimate": 0,
        "title": mr.title,
        "updated_at": hooks.t(mr.updated_ms),
        "updated_by_id": None,
        "prepared_at": hooks.t(mr.created_ms),
        "url": url,
        "source": hooks.project(proj),
        "target": hooks.project(proj),
        "last_commit": {
            "id": mr.sha,
            "message": f"{mr.title}\n",
            "title": mr.title,
            "timestamp": iso(mr.created_ms).replace(".000Z", "Z"),
            "url": f"{hooks.shapes.project_web(proj)}/-/commit/{mr.sha}",
            "author": {"name": author.name, "email": f"{author.username}@example.com"},
        },
        "work_in_progress": mr.draft,
        "total_time_spent": 0,
        "time_change": 0,
        "human_total_time_spent": None,
        "human_time_change": None,
        "human_time_estimate": None,
        "assignee_ids": [fake.users[a].id for a in mr.assignees],
        "reviewer_ids": [],
        "labels": hooks.labels(proj, mr.labels),
        "state": mr.state,
        "blocking_discussions_resolved": True,
        "first_contribution": False,
        "detailed_merge_status": "mergeable" if mr.state == "opened" else "not_open",
        "action": action,
    }
    if action == "merge":
        attrs["oldrev"] = None
    diff: JSON = dict(changes or {})
    if action == "merge":
        diff = {"state_id": {"previous": 1, "current": 3}} | diff
    return hooks.envelope(proj, "merge_request", "merge_request", actor) | {
        "object_attributes": attrs,
        "labels": hooks.labels(proj, mr.labels),
        "changes": diff,
        "repository": hooks.repository(proj),
        "assignees": [hooks.user(a) for a in mr.assignees],
        "reviewers": [],
    }


def note_hook_payload(
    fake: FakeGitLab,
    project: int | str,
    iid: int,
    note_id: int | None = None,
    *,
    action: str = "create",
    time_format: TimeFormat = "utc",
) -> JSON:
    """A Note Hook for a comment on an issue (the latest user comment unless
    ``note_id``); ``issue`` carries the issue's hook attributes."""
    proj = fake.project(project)
    issue = proj.issues[iid]
    if note_id is None:
        notes = [n for n in issue.notes if not n.system]
    else:
        notes = [n for n in issue.notes if n.id == note_id]
    if not notes:
        raise ValueError(f"{proj.path_with_namespace}#{iid} has no such note")
    note = notes[-1]
    hooks = HookShapes(fake, time_format)
    url = f"{hooks.shapes.issue_web(proj, iid)}#note_{note.id}"
    attrs: JSON = {
        "attachment": None,
        "author_id": fake.users[note.author].id,
        "change_position": None,
        "commit_id": None,
        "created_at": hooks.t(note.created_ms),
        "discussion_id": fake_sha("discussion", note.id),
        "id": note.id,
        "line_code": None,
        "note": note.body,
        "noteable_id": issue.id,
        "noteable_type": "Issue",
        "original_position": None,
        "position": None,
        "project_id": proj.id,
        "resolved_at": None,
        "resolved_by_id": None,
        "resolved_by_push": None,
        "st_diff": None,
        "system": note.system,
        "type": None,
        "updated_at": hooks.t(note.updated_ms),
        "updated_by_id": None,
        "description": note.body,
        "url": url,
        "action": action,
    }
    return hooks.envelope(proj, "note", "note", note.author) | {
        "project_id": proj.id,
        "object_attributes": attrs,
        "repository": hooks.repository(proj),
        "issue": hooks.issue_attrs(issue),
    }
