"""``TaskText<N>``: the one text type of the task record.

A value is admitted when it is non-empty valid UTF-8 of at most ``N`` bytes, carries no
Unicode control character (category Cc) and is not credential-shaped. Credential-shaped
is exactly the set Cotal's ``validateHostedEnvironmentRecordText`` refuses, so the task
record and the environment record cannot drift on it:

- a ``-----BEGIN … PRIVATE KEY-----`` or ``-----BEGIN … CREDENTIAL…-----`` block;
- text that starts with ``Bearer`` and a space (any case);
- ``token``, ``secret``, ``api_key``/``api-key``/``apikey``, ``credential`` or ``password``
  at the start or after a non-letter, then optional spaces and ``:`` or ``=`` (any case);
- a whole absolute URL with userinfo, or with a query key containing ``token``, ``key``,
  ``secret``, ``signature``, ``credential`` or ``bearer`` (any case).

Refusals never quote the refused value: it may be the secret.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z ]*(?:PRIVATE KEY|CREDENTIAL)[A-Z ]*-----")
_BEARER = re.compile(r"^Bearer\s", re.IGNORECASE)
_ASSIGNMENT = re.compile(
    r"(?:^|[^A-Za-z])(token|secret|api[_-]?key|credential|password)\s*[:=]", re.IGNORECASE
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_SECRET_QUERY_KEY = re.compile(r"token|key|secret|signature|credential|bearer", re.IGNORECASE)
_SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp", "file"})
# Whitespace a URL's host cannot hold; in the userinfo, path, query and fragment the URL
# parser percent-encodes it, so there it leaves the text a URL.
_BLANK = re.compile(r"\s")

# The control characters (Unicode category Cc: U+0000-U+001F and U+007F-U+009F), the one
# statement of them: the validator, the schema pattern and the trackers' cleaning use it.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Admitted texts of at most this many characters are remembered per ``TaskText``: every
# write re-validates its record (the rules build the next state through the model), and
# the same title, ids and principals come back write after write.
_REMEMBERED_CHARS = 256
_REMEMBERED = 4096
# The schema's form of "no control character". A safe pattern: one class, one quantifier,
# no lookaround, so Cotal's assertSafePattern and every validator accept it.
NO_CONTROL_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"


def first_control(value: str) -> int | None:
    """The position of ``value``'s first control character, if it has one."""
    found = _CONTROL.search(value)
    return None if found is None else found.start()


def controls_as_spaces(value: str) -> str:
    """``value`` with each control character replaced by a space."""
    return _CONTROL.sub(" ", value)


# Line structure inside the contract. A line break is a control character (U+000A is
# category Cc), which ``TaskText`` refuses; U+2028 LINE SEPARATOR (Zl) and U+2029
# PARAGRAPH SEPARATOR (Zp) are not, so a multi-line text keeps its lines as those two.
# Every tracker's mapping reads its text through ``lines_kept`` and every write plan and
# reader (dashboard, agents) gives it back through ``line_breaks``: the one conversion.
LINE_SEPARATOR = "\u2028"
PARAGRAPH_SEPARATOR = "\u2029"
_NEWLINES = re.compile("\r\n?")
TAB_SPACES = "    "  # a tab is a control character too; Markdown reads it as four spaces


def lines_kept(value: str) -> str:
    """A multi-line text (a tracker's issue body, a note) in a form ``TaskText`` admits.

    A blank line between two lines (``\\n\\n``) becomes U+2029, any other line break
    (``\\n``, ``\\r\\n`` or ``\\r``) U+2028, a tab four spaces, and every other control
    character a space. ``line_breaks`` gives the text back as it was written, up to the
    ``\\r`` and tabs: ``line_breaks(lines_kept(t)) == t`` for a text of ``\\n`` lines.
    """
    text = _NEWLINES.sub("\n", value).replace("\t", TAB_SPACES)
    text = text.replace("\n\n", PARAGRAPH_SEPARATOR).replace("\n", LINE_SEPARATOR)
    return controls_as_spaces(text)


def line_breaks(value: str) -> str:
    """A ``TaskText``'s line structure as line breaks (``\\n``), the way a person, an
    agent or a tracker's own text reads it: U+2029 a blank line, U+2028 a line break."""
    return value.replace(PARAGRAPH_SEPARATOR, "\n\n").replace(LINE_SEPARATOR, "\n")


class TextRefused(ValueError):
    """A value ``TaskText`` does not admit. ``message`` names the field and the remedy."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _subject(field: str, task: str | None) -> str:
    return f"{field} of task {task!r}" if task else field


def credential_shape(value: str) -> str | None:
    """Describe the credential shape ``value`` has, or ``None`` when it has none."""
    if _KEY_BLOCK.search(value):
        return "a private-key or credential block"
    if _BEARER.search(value):
        return "a Bearer credential"
    match = _ASSIGNMENT.search(value)
    if match:
        return f"a {match.group(1).lower()!r} assignment"
    return _url_credential_shape(value)


def _url_credential_shape(value: str) -> str | None:
    """The URL part of the refusal: a whole absolute URL (WHATWG-style leniency)."""
    text = value.strip(" ")
    scheme_match = _SCHEME.match(text)
    if scheme_match is None:
        return None
    scheme = scheme_match.group(1).lower()
    rest = text[scheme_match.end() :]
    special = scheme in _SPECIAL_SCHEMES
    if special:
        rest = rest.lstrip("/\\")
        has_authority = True
    else:
        has_authority = rest.startswith("//")
        rest = rest[2:] if has_authority else rest
    before_fragment = rest.split("#", 1)[0]
    if has_authority:
        authority = re.split(r"[/?#\\]" if special else r"[/?#]", before_fragment, maxsplit=1)[0]
        if _BLANK.search(authority.rsplit("@", 1)[-1]):
            return None  # a host with a space (or a line separator) in it is no URL
        if "@" in authority:
            userinfo, host = authority.rsplit("@", 1)
            username, _, password = userinfo.partition(":")
            if (username or password) and (host or scheme == "file"):
                return "a URL with userinfo"
    if "?" in before_fragment:
        query = before_fragment.split("?", 1)[1]
        for pair in query.split("&"):
            key = unquote(pair.split("=", 1)[0].replace("+", " "))
            if _SECRET_QUERY_KEY.search(key):
                return "a URL whose query has a secret-shaped key"
    return None


def check_task_text(value: str, max_bytes: int, *, field: str, task: str | None = None) -> str:
    """Return ``value`` when ``TaskText<max_bytes>`` admits it, else raise ``TextRefused``."""
    if not value:
        where = _subject(field, task)
        raise TextRefused(f"{where} is empty; give a non-empty value or omit the field")
    try:
        size = len(value.encode("utf-8"))
        surrogate = None
    except UnicodeEncodeError as exc:
        size = len(value.encode("utf-8", errors="surrogatepass"))
        surrogate = exc
    if size > max_bytes:
        raise TextRefused(
            f"{_subject(field, task)} is {size} bytes of UTF-8, over its limit of {max_bytes}; "
            f"shorten it to at most {max_bytes} bytes"
        )
    if surrogate is not None:
        raise TextRefused(
            f"{_subject(field, task)} is not valid UTF-8 (a lone surrogate at "
            f"{surrogate.start}); send valid text"
        ) from surrogate
    index = first_control(value)
    if index is not None:
        raise TextRefused(
            f"{_subject(field, task)} has a control character (U+{ord(value[index]):04X}) "
            f"at position {index}; remove it (line breaks and tabs included)"
        )
    shape = credential_shape(value)
    if shape is not None:
        raise TextRefused(
            f"{_subject(field, task)} looks like a credential ({shape}); a task record is "
            "readable by every dashboard, so it holds no secret: remove the secret and say "
            "where it is kept instead"
        )
    return value


@dataclass(frozen=True, slots=True)
class TaskText:
    """The annotation that makes a ``str`` field a ``TaskText<max_bytes>``.

    Use as ``Annotated[str, TaskText(200)]``; the aliases below name the record's uses.
    """

    max_bytes: int
    # Texts already admitted at this bound (the check is a pure function of the two).
    _admitted: dict[str, None] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def validate(self, value: str, info: core_schema.ValidationInfo) -> str:
        admitted = self._admitted
        if value in admitted:
            return value
        field = info.field_name or "value"
        data = info.data if isinstance(info.data, dict) else {}
        task = data.get("taskId")
        try:
            check_task_text(
                value, self.max_bytes, field=field, task=task if isinstance(task, str) else None
            )
        except TextRefused as exc:
            raise PydanticCustomError("task_text", "{message}", {"message": exc.message}) from exc
        if len(value) <= _REMEMBERED_CHARS:
            if len(admitted) >= _REMEMBERED:
                admitted.clear()
            admitted[value] = None
        return value

    def __get_pydantic_core_schema__(
        self, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(
            self.validate, core_schema.str_schema(strict=True)
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # maxLength counts characters; a string of at most N bytes has at most N characters,
        # so this is the exact bound a JSON Schema can state. The byte bound is the server's.
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": self.max_bytes,
            "pattern": NO_CONTROL_PATTERN,
        }
