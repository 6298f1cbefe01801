"""Credentials masked out of text the bridge prints or logs: the userinfo of any URL in
it (``nats://user:secret@host`` -> ``nats://***@host``), up to the last ``@`` of the
authority so a password holding an ``@`` is masked whole, and the value of a query
parameter whose name is secret-shaped (``?private_token=…`` -> ``?private_token=***``),
the same names ``TaskText`` refuses. Pure: works on any text, URLs anywhere in it."""

from __future__ import annotations

import re

MASK = "***"
# The authority ends at the first ``/``, ``?``, ``#`` or space; the greedy run then backs
# off to the last ``@`` inside it, so ``user:p@ss@host`` masks ``user:p@ss`` whole.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s]+)@")
_SECRET_PARAM = re.compile(
    r"(?P<key>[?&;][^=&#\s]*(?:token|key|secret|signature|credential|bearer|password)"
    r"[^=&#\s]*=)(?P<value>[^&#\s]+)",
    re.IGNORECASE,
)


def mask_credentials(text: str) -> str:
    """``text`` with every URL's userinfo and secret-shaped query values masked."""
    masked = _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m.group('key')}{MASK}", masked)
