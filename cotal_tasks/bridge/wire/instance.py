"""A stable ``instanceId`` per endpoint, kept in the data directory, and an ``epoch`` that
grows on every start (SPEC §13.1). Several instances of one endpoint each keep their own
data directory, so each has its own id; they share the queue group, not the identity.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cotal_tasks.core.identity import INSTANCE_ID
from cotal_tasks.files import private_dir, write_private

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True, slots=True)
class InstanceIdentity:
    instance_id: str
    epoch: int


def new_instance_id() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(26))


def next_incarnation(data_dir: Path, endpoint_token: str) -> InstanceIdentity:
    """Load (or mint) this endpoint's instance id, advance its epoch, and persist both."""
    path = data_dir / f"{endpoint_token}.instance.json"
    private_dir(data_dir)
    instance_id, epoch = new_instance_id(), 0
    if path.exists():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if INSTANCE_ID.fullmatch(saved["instanceId"]) and int(saved["epoch"]) >= 0:
                instance_id, epoch = saved["instanceId"], int(saved["epoch"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(
                f"{path} is damaged ({exc}). Restore it, or delete it to start a new instance "
                "identity (callers bound to the old one will re-describe)"
            ) from exc
    identity = InstanceIdentity(instance_id, epoch + 1)
    tmp = path.with_suffix(".tmp")
    write_private(tmp, json.dumps({"instanceId": instance_id, "epoch": identity.epoch}))
    os.replace(tmp, path)
    return identity
