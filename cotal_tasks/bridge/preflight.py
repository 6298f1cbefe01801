"""What ``serve`` checks before it does anything, and what ``check-config`` reports: one
walk over a validated config and the environment it names.

The file's own form (keys, URLs, names) is checked when it loads (``config.load_config``).
This walk checks what the file points at: each ``*_env`` variable is set, and its value is
one the bridge may use (``core.secrets``: a tracker token not empty nor padded with
whitespace, a webhook secret or a read API bearer secret long enough), two bearer tokens
do not share a secret, and a ``nats_credentials`` file is there to read. The parts that
use those values refuse them with the same rules (a tracker's client, a webhook receiver,
the read API's tokens), so a config ``check-config`` passes is one ``serve`` starts on.

A finding is ``blocking`` (``serve`` refuses to start, exit 2, one line each) or a
warning (a feature is lost: an unset webhook secret refuses every delivery).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.core.secrets import BEARER_SECRET, TRACKER_TOKEN, WEBHOOK_SECRET, SecretRule
from cotal_tasks.providers import registry

# Variables a config names whose absence only loses a feature (a webhook receiver refuses
# deliveries without its secret); every other ``*_env`` variable is required.
_OPTIONAL_ENV = frozenset({"webhook_secret_env"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One mistake (or, not ``blocking``, one lost feature) at the config's ``key``; the
    message names the key, what is wrong and the remedy."""

    key: str
    message: str
    blocking: bool = True


def preflight(config: BridgeConfig, environ: Mapping[str, str]) -> list[Finding]:
    """Every finding of ``config`` in ``environ``, in the file's order."""
    found: list[Finding] = []
    secrets_seen: dict[str, str] = {}
    for key, variable in env_keys(config, ""):
        field = key.rsplit(".", 1)[-1]
        if field == "nats_password_env" and config.nats_user is None:
            continue
        value = environ.get(variable)
        if value is None:
            found.append(_unset(key, variable, optional=field in _OPTIONAL_ENV))
            continue
        rule = _rule(key, field)
        refusal = rule.refusal(variable, value) if rule is not None else None
        if refusal is not None:
            found.append(Finding(key, f"{key}: {refusal}"))
        elif rule is BEARER_SECRET and value in secrets_seen:
            found.append(
                Finding(
                    key,
                    f"{key}: {variable} and {secrets_seen[value]} hold the same secret, so a "
                    "request could not tell the two principals apart. Give each its own secret",
                )
            )
        elif rule is BEARER_SECRET:
            secrets_seen[value] = variable
    creds = config.nats_credentials
    if creds is not None and not os.access(creds, os.R_OK):
        found.append(
            Finding(
                "nats_credentials",
                f"nats_credentials: {creds} is not a file this user can read. Give the path "
                "of the bridge's .creds file (relative paths are relative to the config file)",
            )
        )
    return found


def blocking(found: list[Finding]) -> list[Finding]:
    return [finding for finding in found if finding.blocking]


def _unset(key: str, variable: str, *, optional: bool) -> Finding:
    if optional:
        return Finding(
            key,
            f"{key} names {variable}, which is not set: the endpoint's webhook route refuses "
            "every delivery (the poll still syncs). Export it to take deliveries",
            blocking=False,
        )
    return Finding(
        key,
        f"{key} names {variable}, which is not set. Export it before serve (the config "
        "names the variable, never the secret)",
    )


def _rule(key: str, field: str) -> SecretRule | None:
    """The rule a variable's value is held to, from the key that names it."""
    if key.startswith("http.tokens."):
        return BEARER_SECRET
    if field == "webhook_secret_env":
        return WEBHOOK_SECRET
    if field == "token_env":
        return TRACKER_TOKEN
    return None


def env_keys(model: BaseModel, prefix: str) -> list[tuple[str, str]]:
    """Every ``*_env`` key under ``model`` (as the file spells it) and the variable it names."""
    keys: list[tuple[str, str]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = _file_key(model, prefix, name)
        if name.endswith("_env") and isinstance(value, str):
            keys.append((key, value))
        elif isinstance(value, BaseModel):
            keys += env_keys(value, key)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    keys += env_keys(item, f"{key}.{i}")
    return keys


def _file_key(model: BaseModel, prefix: str, name: str) -> str:
    if name == "settings" and isinstance(model, EndpointConfig):
        entry = registry.BY_NAME[model.provider]
        name = entry.section or entry.name
    return f"{prefix}.{name}" if prefix else name
