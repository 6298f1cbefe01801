"""The bridge's logging: one level for the project (``[log] level``, ``--log-level``),
libraries (httpx, alembic, uvicorn, nats …) at WARNING unless asked (``[log] libraries``),
and one format, text or JSON (``[log] format``: one JSON object a line).

A log line knows what it is about: ``log_context`` binds the endpoint, the command and
the envelope id for the code that runs after it in the same task (the wire binds them for
each request it serves, the process binds the endpoint for each background loop), and
the JSON format writes them as fields.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["text", "json"]
LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error")
_PROJECT = "cotal_tasks"
_FIELDS = ("endpoint", "command", "envelope_id")
_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "cotal_tasks_log_context", default=None
)


def log_context(**fields: str | None) -> None:
    """Bind ``fields`` (endpoint, command, envelope_id) to the log lines of this context."""
    current = _context.get()
    bound = {} if current is None else dict(current)
    for key, value in fields.items():
        if value is not None:
            bound[key] = value
    _context.set(bound)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the bound context, and the
    exception's traceback as one string field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in _FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        about = [f"{key}={getattr(record, key)}" for key in _FIELDS if hasattr(record, key)]
        return f"{line} [{' '.join(about)}]" if about else line


def configure(
    level: LogLevel = "info", fmt: LogFormat = "text", libraries: LogLevel = "warning"
) -> None:
    """Send every log record to stderr: the project's at ``level``, the rest at ``libraries``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ContextFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(libraries.upper())
    logging.getLogger(_PROJECT).setLevel(level.upper())
    # Libraries that set their own level (uvicorn, alembic) follow ``libraries`` too.
    for name in ("alembic", "uvicorn", "uvicorn.error", "httpx", "httpcore", "nats", "mcp"):
        logging.getLogger(name).setLevel(libraries.upper())
