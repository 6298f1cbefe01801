"""The OpenAPI 3.1 description of the HTTP surface, served at ``GET /v1/openapi.json``.

Written by hand for the routes; the record schemas (``Task``, ``TaskPage`` and what they
use) are the contract's own JSON Schemas from ``cotal_tasks.core``, so they cannot drift
from what the wire answers.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute

from cotal_tasks.core import STATUSES, Task, TaskPage, json_schema

Json = dict[str, Any]
_REF = "#/components/schemas/"


def _refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_refs(item) for item in node]
    if isinstance(node, dict):
        return {
            key: value.replace("#/$defs/", _REF)
            if key == "$ref" and isinstance(value, str)
            else _refs(value)
            for key, value in node.items()
        }
    return node


def _schemas() -> Json:
    out: Json = {}
    for model in (Task, TaskPage):
        schema = json_schema(model)
        schema.pop("$schema", None)
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    out = _refs(out)
    out["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "An EP_ERROR_CODES code."},
                    "message": {"type": "string", "description": "What happened; the remedy."},
                },
            }
        },
    }
    out["Liveness"] = {
        "type": "object",
        "required": ["view", "seat"],
        "properties": {
            "view": {"enum": ["current", "stale", "unpopulated"]},
            "seat": {"enum": ["online", "offline", "replaced", "unknown"]},
            "lastSeen": {"type": "integer", "description": "Epoch ms of the seat's card."},
        },
    }
    board = copy.deepcopy(out["TaskPage"])
    board["description"] = "A list-tasks page whose tasks are full records, with presence."
    board["properties"].update(
        {
            "tasks": {"type": "array", "items": {"$ref": _REF + "Task"}},
            "endpoint": {"type": "string"},
            "presence": {
                "type": "object",
                "required": ["view"],
                "properties": {
                    "view": {"enum": ["current", "stale", "unpopulated"]},
                    "observedAt": {"type": "integer"},
                    "reason": {"type": "string"},
                },
            },
            "liveness": {
                "type": "object",
                "description": "Keyed by the bound seat, owner.actor/lifecycleUid.",
                "additionalProperties": {"$ref": _REF + "Liveness"},
            },
        }
    )
    board["required"] = [*board["required"], "endpoint", "presence", "liveness"]
    out["Board"] = board
    out["HistoryEntry"] = {
        "type": "object",
        "description": "One committed change: when, who, which command, the status it "
        "left the task in, and the note the command carried.",
        "additionalProperties": False,
        "required": ["taskId", "at", "command", "actor", "status"],
        "properties": {
            "taskId": {"type": "string"},
            "at": {"type": "integer", "description": "Epoch ms."},
            "command": {"type": "string"},
            "actor": {"type": "string", "description": "The caller, or the sync's name."},
            "status": {"enum": ["open", "claimed", "blocked", "done", "dropped"]},
            "note": {"type": "string"},
        },
    }
    out["HistoryPage"] = {
        "type": "object",
        "description": "A page of the append-only history, oldest first.",
        "required": ["endpoint", "entries", "appliedLimit", "observedAt", "changeSeq"],
        "properties": {
            "endpoint": {"type": "string"},
            "entries": {"type": "array", "items": {"$ref": _REF + "HistoryEntry"}},
            "appliedLimit": {"type": "integer", "minimum": 1},
            "nextCursor": {"type": "string", "description": "Present when there is more."},
            "followCursor": {
                "type": "string",
                "description": "The position after the last entry: pass it later to read "
                "only what was appended since.",
            },
            "observedAt": {"type": "integer"},
            "changeSeq": {"type": "integer", "minimum": 0},
            "stale": out["TaskPage"]["properties"]["stale"],
        },
    }
    out["BoardChanged"] = {
        "type": "object",
        "description": "The data of one 'board-changed' server-sent event.",
        "additionalProperties": False,
        "required": ["endpoint", "changeSeq", "observedAt"],
        "properties": {
            "endpoint": {"type": "string"},
            "changeSeq": {"type": "integer", "minimum": 0},
            "observedAt": {"type": "integer", "minimum": 0},
        },
    }
    return out


def _errors(*codes: int) -> Json:
    meaning = {
        400: "Bad input (bad-request): a query parameter, cursor or limit the command refuses.",
        401: "No token, or a token this bridge does not know (unauthenticated).",
        403: "The token lacks the capability (permission-denied).",
        404: "No such endpoint or task (not-found).",
        503: "The store cannot be read (unavailable); never an empty page.",
    }
    body = {"application/json": {"schema": {"$ref": _REF + "Error"}}}
    return {str(code): {"description": meaning[code], "content": body} for code in codes}


def _ok(description: str, schema: Json, media: str = "application/json") -> Json:
    return {"200": {"description": description, "content": {media: {"schema": schema}}}}


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_PAGE = [
    {"name": "cursor", "in": "query", "schema": {"type": "string"}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
]
_STATUS = {
    "name": "status",
    "in": "query",
    "description": "Repeat it or separate values with commas.",
    "schema": {
        "type": "array",
        "items": {"enum": list(STATUSES)},
    },
    "style": "form",
    "explode": True,
}
_READ: list[Json] = [{"bearer": []}]
_PAGE_REF = {"$ref": _REF + "TaskPage"}


def _paths() -> Json:
    return {
        "/v1/endpoints": {
            "get": {
                "summary": "The endpoints this bridge serves (tasks.read).",
                "security": _READ,
                "responses": {
                    **_ok("Endpoints", {"type": "object"}),
                    **_errors(400, 401, 403),
                },
            }
        },
        "/v1/endpoints/{name}/tasks": {
            "get": {
                "summary": "list-tasks (tasks.read): a bounded page of task summaries.",
                "security": _READ,
                "parameters": [_NAME, *_PAGE, _STATUS],
                "responses": {**_ok("A page", _PAGE_REF), **_errors(400, 401, 403, 404, 503)},
            }
        },
        "/v1/endpoints/{name}/tasks/{taskId}": {
            "get": {
                "summary": "get-task (tasks.read): one full task record.",
                "security": _READ,
                "parameters": [
                    _NAME,
                    {
                        "name": "taskId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    **_ok("The task", {"$ref": _REF + "Task"}),
                    **_errors(400, 401, 403, 404, 503),
                },
            }
        },
        "/v1/endpoints/{name}/my-tasks": {
            "get": {
                "summary": "my-tasks (tasks.self): the tasks bound to the token's principal and "
                "lifecycle_uid.",
                "security": _READ,
                "parameters": [_NAME, *_PAGE],
                "responses": {**_ok("A page", _PAGE_REF), **_errors(400, 401, 403, 404, 503)},
            }
        },
        "/v1/endpoints/{name}/board": {
            "get": {
                "summary": "The dashboard feed (tasks.read): list-tasks with full records, the "
                "presence view and each bound seat's liveness.",
                "security": _READ,
                "parameters": [_NAME, *_PAGE, _STATUS],
                "responses": {
                    **_ok("A board page", {"$ref": _REF + "Board"}),
                    **_errors(400, 401, 403, 404, 503),
                },
            }
        },
        "/v1/endpoints/{name}/history": {
            "get": {
                "summary": "The append-only history (tasks.read): one task's (taskId) or the "
                "endpoint's, oldest first, at most 1000 entries a page.",
                "security": _READ,
                "parameters": [
                    _NAME,
                    *_PAGE,
                    {"name": "taskId", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    **_ok("A history page", {"$ref": _REF + "HistoryPage"}),
                    **_errors(400, 401, 403, 404, 503),
                },
            }
        },
        "/v1/events": {
            "get": {
                "summary": "board-changed of every endpoint as server-sent events (tasks.read); "
                "a ': keep-alive' comment every 15 s.",
                "security": _READ,
                "responses": {
                    **_ok(
                        "An event stream: 'event: board-changed' with BoardChanged as data",
                        {"type": "string"},
                        "text/event-stream",
                    ),
                    **_errors(401, 403),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This description (no token needed).",
                "security": [],
                "responses": _ok("OpenAPI 3.1", {"type": "object"}),
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness and per-endpoint readiness (no token needed).",
                "security": [],
                "responses": {
                    **_ok("Every endpoint ready", {"type": "object"}),
                    "503": {"description": "An endpoint or the broker is not ready"},
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (no token needed).",
                "security": [],
                "responses": _ok("Prometheus text", {"type": "string"}, "text/plain"),
            }
        },
        "/": {
            "get": {
                "summary": "The dashboard page (static; its data comes from /v1).",
                "security": [],
                "responses": _ok("HTML", {"type": "string"}, "text/html"),
            }
        },
        "/static/{file}": {
            "get": {
                "summary": "The dashboard's script, style and icon.",
                "security": [],
                "parameters": [
                    {"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    **_ok("The file", {"type": "string"}, "*/*"),
                    "404": {"description": "No such file"},
                },
            }
        },
    }


def openapi_document(extra: Sequence[BaseRoute] = ()) -> Json:
    """The description; ``extra`` routes (webhook receivers) are listed generically."""
    paths = _paths()
    for route in extra:
        path = getattr(route, "path", None)
        if not isinstance(path, str) or path in paths:
            continue
        methods = sorted(getattr(route, "methods", None) or {"POST"})
        paths[path] = {
            method.lower(): {
                "summary": "A receiver a hosted provider contributes (a webhook, signed by "
                "the tracker and checked in constant time).",
                "security": [],
                "responses": {"200": {"description": "Accepted"}},
            }
            for method in methods
            if method != "HEAD"
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cotal-tasks bridge",
            "version": "1",
            "description": "The ai.cotal.tasks read commands over HTTP, the board-changed "
            "event stream, health, metrics and the dashboard. Pages, bounds, the stale "
            "marker and error codes are the Cotal wire's.",
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A secret from [[http.tokens]]. With none configured, a "
                    "bridge on its embedded broker and a loopback address admits loopback "
                    "requests as a tasks.read reader.",
                }
            },
        },
    }
