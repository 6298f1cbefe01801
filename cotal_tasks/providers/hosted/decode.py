"""A tracker's JSON answer, decoded once and fast.

A listing page of a hundred issues is most of what a walk decodes, and it is read twice:
by the pager (which looks at the page's last ``updated_at`` to ask the next one) and by
the tracker's walk (which maps it). ``body_of`` decodes a response's body with orjson
the first time it is asked, and hands every later reader the same value (``loads``, which
a webhook's body is decoded with too). orjson refuses
a lone surrogate escape (``"\\ud83d"``), which JSON allows and trackers send; such a
body is decoded by the standard library instead, as before, and the mapping repairs the
text (``hosted.mapping.safe_cut``).
"""

from __future__ import annotations

import json
import weakref
from typing import Any

import httpx
import orjson

_decoded: weakref.WeakKeyDictionary[httpx.Response, Any] = weakref.WeakKeyDictionary()


def body_of(response: httpx.Response) -> Any:
    """The response's JSON body (``ValueError`` when it is not JSON), decoded once. Treat
    it as read-only: every reader of the response gets this same value."""
    try:
        return _decoded[response]
    except KeyError:
        pass
    body = loads(response.content)
    _decoded[response] = body
    return body


def loads(content: bytes) -> Any:
    """JSON text decoded with orjson, or by the standard library where orjson refuses it
    (a lone surrogate; not JSON: ``ValueError``; nested too deep: ``RecursionError``)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)
