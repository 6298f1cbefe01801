"""``TaskText<N>``: credential-shaped refusals, byte (not character) bounds, control
characters, emptiness, and what a refusal message says and never says."""

from __future__ import annotations

import re
import unicodedata
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    TASK_VERSION,
    Task,
    TaskText,
    TextRefused,
    check_task_text,
    credential_shape,
)
from cotal_tasks.core.text import (
    NO_CONTROL_PATTERN,
    controls_as_spaces,
    first_control,
    line_breaks,
    lines_kept,
)
from cotal_tasks.providers.hosted.mapping import clean_text

# Each of these is refused, and the comment names the rule of text.py that refuses it.
CREDENTIAL_SHAPED = [
    # _KEY_BLOCK: private-key and credential blocks (anywhere in the text).
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN ENCRYPTED PRIVATE KEY-----",
    "see -----BEGIN EC PRIVATE KEY----- below",
    "-----BEGIN CREDENTIAL-----",
    "-----BEGIN AWS CREDENTIALS-----",
    # _BEARER: starts with Bearer and a whitespace, any case.
    "Bearer xyz",
    "bearer xyz",
    "BEARER abc.def.ghi",
    # _ASSIGNMENT: keyword at the start or after a non-letter, optional spaces, ':' or '='.
    "token: x",
    "token=",
    "TOKEN =abc",
    "api_key=abc123",
    "api-key = abc",
    "apikey: abc",
    "x-api-key:1",
    "PASSWORD = x",
    "password:hunter2",
    "my_secret=abc",
    "db.secret = s3",
    "credential: /vault/path",
    "the token: 42 is mine",
    "1password=yes",
    # _url_credential_shape: a whole absolute URL with userinfo ...
    "https://user:pw@host/",
    "https://bob@host",
    "HTTPS://U:P@H/",
    "ssh://git@github.com/x/y.git",
    "https://:pw@host/",
    "ftp://anon@files.example.com/pub",
    # ... or with a secret-shaped query key.
    "https://host/x?access_token=1",
    "https://host/x?signature=abc",
    "https://host/x?Signature=abc",
    "https://s3.example.com/b/k?X-Amz-Credential=AKIA",
    "https://host/x?apiKey=1",
    "https://host/x?bearer=1",
    "https://host/x?page=2&client_secret=1",
    "https://host/x?monkey=1",
    "https://host/x?to%6Ben=1",
    "https://host/x?api+key=1",
    # Kept lines change none of it: U+2028/U+2029 are whitespace to every rule, and a URL
    # whose path holds a space or a separator is still a URL (the parser encodes them).
    "Bearer\u2028abc",
    "token\u2028: x",
    "x\u2028token=1",
    "api_key\u2029=1",
    "https://u:p@host/a b",
    "https://u:p@host/x\u2028more text",
    "https://host/x\u2029?token=1",
]

# Look-alikes that every rule lets through; the comment says why each one misses.
HARMLESS = [
    "tokens of appreciation",  # no ':' or '=' after the keyword
    "token bucket rate limiter",
    "the password policy doc",
    "password reset flow (see wiki)",
    "passwords: none",  # 's' sits between 'password' and ':'
    "credentials: see the vault runbook",  # likewise 's'
    "secrets = none here",  # likewise 's'
    "secretary meeting notes",
    "Secret Santa: draw names",  # a word, not ':' or '=', follows 'Secret'
    "the key: rotate quarterly",  # 'key' alone is not a keyword
    "keyboard=broken",
    "Bearerless",  # 'Bearer' not followed by whitespace
    "Bearer",
    "The bearer of bad news",  # 'Bearer' not at the start
    "-----BEGIN CERTIFICATE-----",  # neither PRIVATE KEY nor CREDENTIAL
    "-----BEGIN PUBLIC KEY-----",
    "-----begin private key-----",  # the block marker is upper case only
    "https://example.com/docs?page=2",
    "https://example.com/docs?sig=1",  # 'sig' contains no secret-shaped word
    "https://example.com/@user",  # '@' in the path, not in the authority
    "https://@example.com/",  # empty userinfo is no userinfo
    "https://example.com/x#token",  # fragment, not query
    "https://example.com/path?",
    "mailto:bob@example.com",  # no authority, no query
    "git@github.com:acme/repo.git",  # not an absolute URL
    "urn:isbn:0451450523",
    "Fix the login page",
    "Rotate the staging certificates before Friday.",
    "café ☕ 🚀 日本語",
    " ",
    "Steps\u2029Bearer abc",  # 'Bearer' starts a line, not the text
    "see\u2028https://u:p@host/",  # a URL on a line of its own is not the whole text
    "https://u:p@h\u2028x",  # a host holding a line separator: no URL at all
    "https://example.com is down? token bucket",  # a host with spaces: no URL either
    "line one\u2028line two\u2029a paragraph",
]


@pytest.mark.parametrize("value", CREDENTIAL_SHAPED)
def test_credential_shaped_text_is_refused(value: str) -> None:
    assert credential_shape(value) is not None
    with pytest.raises(TextRefused) as caught:
        check_task_text(value, 4096, field="brief")
    assert "looks like a credential" in caught.value.message
    assert "remove the secret" in caught.value.message


@pytest.mark.parametrize("value", HARMLESS)
def test_look_alike_text_is_accepted(value: str) -> None:
    assert credential_shape(value) is None
    assert check_task_text(value, 4096, field="brief") == value


def test_there_are_at_least_twenty_of_each() -> None:
    assert len(CREDENTIAL_SHAPED) >= 20
    assert len(HARMLESS) >= 20
    assert not set(CREDENTIAL_SHAPED) & set(HARMLESS)


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----", "a private-key or credential block"),
        ("bearer xyz", "a Bearer credential"),
        ("API_KEY = 3", "a 'api_key' assignment"),
        ("my_secret=abc", "a 'secret' assignment"),
        ("https://host/x?access_token=1", "a 'token' assignment"),
        ("https://bob@host", "a URL with userinfo"),
        ("https://host/x?signature=abc", "a URL whose query has a secret-shaped key"),
        ("https://host/x?bearer=1", "a URL whose query has a secret-shaped key"),
    ],
)
def test_credential_shape_names_the_rule(value: str, shape: str) -> None:
    assert credential_shape(value) == shape


@pytest.mark.parametrize(
    "value",
    [
        # The keyword rule fires only at the start or after a non-letter, as in Cotal's
        # validateHostedEnvironmentRecordText; a keyword glued to a letter is no assignment.
        "mysecret=abc",
        # The URL rules apply to a value that is a whole URL; one inside a sentence is text.
        "see https://bob:pw@host for details",
        # A JSON-quoted key puts '"' between the keyword and ':'.
        '"token": "x"',
    ],
)
def test_documented_boundaries_of_the_refusal_set(value: str) -> None:
    assert credential_shape(value) is None


# --- byte bounds ---------------------------------------------------------------------


def _exactly(n: int, char: str) -> str:
    """A string of exactly ``n`` UTF-8 bytes, as many ``char`` as fit, then ASCII."""
    width = len(char.encode("utf-8"))
    return char * (n // width) + "a" * (n % width)


@pytest.mark.parametrize("char", ["a", "é", "€", "😀"])
@pytest.mark.parametrize("limit", [4, 5, 64, 128, 200, 512, 2048, 4096])
def test_byte_limit_is_inclusive_and_one_byte_over_is_refused(char: str, limit: int) -> None:
    at_limit = _exactly(limit, char)
    assert len(at_limit.encode("utf-8")) == limit
    assert check_task_text(at_limit, limit, field="title") == at_limit

    over = at_limit + "a"
    with pytest.raises(TextRefused) as caught:
        check_task_text(over, limit, field="title")
    message = caught.value.message
    assert f"is {limit + 1} bytes of UTF-8" in message
    assert f"over its limit of {limit}" in message
    assert f"shorten it to at most {limit} bytes" in message


@pytest.mark.parametrize(("char", "width"), [("é", 2), ("€", 3), ("😀", 4), ("日", 3), ("ß", 2)])
def test_bound_counts_bytes_not_characters(char: str, width: int) -> None:
    assert len(char.encode("utf-8")) == width
    limit = 200
    fitting = char * (limit // width)
    assert check_task_text(fitting, limit, field="title") == fitting
    # One more character is still far fewer than 200 characters, but too many bytes.
    too_many = fitting + char
    assert len(too_many) < limit
    with pytest.raises(TextRefused, match=rf"is {len(too_many.encode())} bytes of UTF-8"):
        check_task_text(too_many, limit, field="title")


# --- control characters, emptiness, encoding --------------------------------------------


@pytest.mark.parametrize(
    "char", ["\u0000", "\u0007", "\u001b", "\u007f", "\u0085", "\u009f", "\t", "\n", "\r"]
)
def test_control_characters_are_refused(char: str) -> None:
    with pytest.raises(TextRefused) as caught:
        check_task_text(f"ab{char}cd", 100, field="title")
    assert f"U+{ord(char):04X}" in caught.value.message
    assert "at position 2" in caught.value.message
    assert "remove it" in caught.value.message


@pytest.mark.parametrize("char", ["\u2028", "\u200b", "\ufeff", "\u00a0"])
def test_non_cc_format_and_separator_characters_are_admitted(char: str) -> None:
    # The rule is Unicode category Cc exactly; Zl, Zs and Cf characters are text.
    value = f"ab{char}cd"
    assert check_task_text(value, 100, field="title") == value


def test_empty_is_refused() -> None:
    with pytest.raises(TextRefused) as caught:
        check_task_text("", 100, field="brief")
    assert caught.value.message == "brief is empty; give a non-empty value or omit the field"


def test_lone_surrogate_is_refused_as_invalid_utf8() -> None:
    with pytest.raises(TextRefused, match="not valid UTF-8"):
        check_task_text("ok\ud800", 100, field="title")


def test_text_refused_is_a_value_error_with_its_message() -> None:
    error = TextRefused("title is empty")
    assert isinstance(error, ValueError)
    assert error.message == "title is empty"
    assert str(error) == "title is empty"


# --- through the models ----------------------------------------------------------------


def _task(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": "t-1",
        "space": "space-1",
        "title": "A task",
        "status": "open",
        "evidence": [],
        "createdAt": 1,
        "updatedAt": 1,
    }
    data.update(fields)
    return data


@pytest.mark.parametrize(
    ("field", "limit"),
    [("space", 128), ("title", 200), ("brief", 4096), ("statusSource", 64)],
)
@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_task_fields_enforce_their_byte_limits(field: str, limit: int, char: str) -> None:
    at_limit = _exactly(limit, char)
    task = Task.model_validate(_task(**{field: at_limit}))
    assert getattr(task, field) == at_limit

    with pytest.raises(ValidationError) as caught:
        Task.model_validate(_task(**{field: at_limit + "a"}))
    [error] = caught.value.errors()
    assert error["loc"] == (field,)
    assert error["type"] == "task_text"
    assert error["msg"].startswith(f"{field} of task 't-1' is {limit + 1} bytes of UTF-8")


def test_task_id_has_a_128_byte_limit() -> None:
    assert Task.model_validate(_task(taskId=_exactly(128, "€"))).taskId == _exactly(128, "€")
    with pytest.raises(ValidationError) as caught:
        Task.model_validate(_task(taskId=_exactly(128, "€") + "a"))
    [error] = caught.value.errors()
    assert error["loc"] == ("taskId",)
    # No task id is known while the task id itself is refused.
    assert error["msg"].startswith("taskId is 129 bytes of UTF-8")


def test_evidence_ref_and_binding_fields_enforce_their_limits() -> None:
    binding = {
        "owner": "acme",
        "actor": "builder",
        "lifecycleUid": "a" * 26,
        "environment": _exactly(2048, "😀"),
        "boundAt": 5,
        "boundBy": _exactly(128, "é"),
    }
    evidence = [{"kind": "commit", "ref": _exactly(512, "€"), "addedAt": 5}]
    task = Task.model_validate(_task(status="claimed", binding=binding, evidence=evidence))
    assert task.binding is not None
    assert task.binding.environment == _exactly(2048, "😀")
    assert task.evidence[0].ref == _exactly(512, "€")

    for path, bad in (
        ("environment", {**binding, "environment": _exactly(2048, "😀") + "a"}),
        ("boundBy", {**binding, "boundBy": _exactly(128, "é") + "a"}),
        ("owner", {**binding, "owner": "x" * 129}),
    ):
        with pytest.raises(ValidationError) as caught:
            Task.model_validate(_task(status="claimed", binding=bad))
        [error] = caught.value.errors()
        assert error["loc"] == ("binding", path)
        assert "bytes of UTF-8" in error["msg"]

    with pytest.raises(ValidationError) as caught:
        Task.model_validate(
            _task(evidence=[{"kind": "commit", "ref": _exactly(512, "€") + "a", "addedAt": 5}])
        )
    [error] = caught.value.errors()
    assert error["loc"] == ("evidence", 0, "ref")
    assert "is 513 bytes of UTF-8, over its limit of 512" in error["msg"]


def test_task_text_is_strict_about_type() -> None:
    with pytest.raises(ValidationError) as caught:
        Task.model_validate(_task(title=7))
    assert caught.value.errors()[0]["type"] == "string_type"


@pytest.mark.parametrize(
    ("bad", "fragment", "secret"),
    [
        ("token: hunter2", "looks like a credential (a 'token' assignment)", "hunter2"),
        ("Bearer sk-live-123", "looks like a credential (a Bearer credential)", "sk-live-123"),
        ("https://u:pw9@h/", "looks like a credential (a URL with userinfo)", "pw9"),
        ("é" * 101, "is 202 bytes of UTF-8, over its limit of 200", "é" * 101),
        ("tab\there", "has a control character (U+0009) at position 3", "tab\there"),
        ("", "is empty", None),
    ],
)
def test_refusal_names_field_task_length_and_remedy_without_the_value(
    bad: str, fragment: str, secret: str | None
) -> None:
    with pytest.raises(ValidationError) as caught:
        Task.model_validate(_task(taskId="b-7k2m9q", title=bad))
    [error] = caught.value.errors()
    message = error["msg"]
    assert error["loc"] == ("title",)
    assert message.startswith("title of task 'b-7k2m9q' ")
    assert fragment in message
    # Every refusal names a next step.
    assert any(
        remedy in message
        for remedy in ("remove the secret", "shorten it", "remove it", "give a non-empty")
    )
    if secret is not None:
        assert secret not in message


def test_credential_refusal_in_check_task_text_never_quotes_the_value() -> None:
    for value in CREDENTIAL_SHAPED:
        with pytest.raises(TextRefused) as caught:
            check_task_text(value, 4096, field="note", task="t-1")
        assert value not in caught.value.message
        assert caught.value.message.startswith("note of task 't-1' looks like a credential")


def test_validation_error_text_does_not_quote_a_refused_secret() -> None:
    with pytest.raises(ValidationError) as caught:
        Task.model_validate(_task(title="token: hunter2"))
    assert "hunter2" not in str(caught.value)


def test_task_text_annotation_json_schema_is_the_character_bound() -> None:
    annotation = TaskText(200)
    assert annotation.max_bytes == 200
    schema = Task.model_json_schema()["properties"]["title"]
    assert schema["maxLength"] == 200
    assert schema["minLength"] == 1
    assert schema["type"] == "string"


# One statement of "control character": the validator, the schema pattern and the trackers'
# cleaning all take Unicode's category Cc, and nothing else.

CONTROLS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"]
NOT_CONTROLS = ["a", " ", "é", "\u00a0", "\u2028", "\u200b", "\ufeff", "😀"]


def test_every_control_character_is_one_by_every_reading() -> None:
    pattern = re.compile(NO_CONTROL_PATTERN)
    assert len(CONTROLS) == 65
    for char in CONTROLS:
        with pytest.raises(TextRefused, match="control character"):
            check_task_text(f"a{char}b", 64, field="title")
        assert first_control(f"ab{char}") == 2
        assert pattern.fullmatch(f"a{char}") is None  # a schema pattern matches the whole
        assert controls_as_spaces(f"a{char}b") == "a b"
        assert clean_text(f"a{char}b", 64, field="title", task="t") == "a b"
        if char not in "\n\r\t":
            assert clean_text(f"a{char}b", 64, field="brief", task="t", lines=True) == "a b"
    for char in NOT_CONTROLS:
        assert first_control(char) is None
        assert pattern.fullmatch(char) is not None
        assert controls_as_spaces(char) == char


# --- the control-character search and remembered admissions ------------------------------


def test_exactly_the_cc_code_points_are_refused_in_the_basic_plane() -> None:
    import unicodedata

    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates are refused as invalid UTF-8
        char = chr(code)
        if unicodedata.category(char) == "Cc":
            with pytest.raises(TextRefused, match=f"U\\+{code:04X}"):
                check_task_text(f"a{char}", 100, field="title")
        else:
            assert check_task_text(f"a{char}", 100, field="title") == f"a{char}"


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``TaskText`` checks from here on (the real check runs)."""
    from cotal_tasks.core import text

    seen: list[str] = []
    real = text.check_task_text

    def counting(value: str, max_bytes: int, **kwargs: Any) -> str:
        seen.append(value)
        return real(value, max_bytes, **kwargs)

    monkeypatch.setattr(text, "check_task_text", counting)
    return seen


def test_an_admitted_text_is_checked_once_per_bound(checked: list[str]) -> None:
    title = f"Remembered {uuid.uuid4().hex}"
    for _ in range(3):
        Task.model_validate(_task(title=title))
    assert checked.count(title) == 1
    # a bound of its own remembers for itself: 150 bytes pass a title, not a space (128)
    wide = f"{uuid.uuid4().hex}" + "x" * 118
    Task.model_validate(_task(title=wide))
    with pytest.raises(ValidationError, match="over its limit of 128"):
        Task.model_validate(_task(space=wide))


def test_refused_and_long_texts_are_never_remembered(checked: list[str]) -> None:
    refused = f"token: {uuid.uuid4().hex}"
    long_brief = uuid.uuid4().hex + "y" * 300
    for _ in range(2):
        with pytest.raises(ValidationError, match="looks like a credential"):
            Task.model_validate(_task(title=refused))
        Task.model_validate(_task(brief=long_brief))
    assert checked.count(refused) == 2
    assert checked.count(long_brief) == 2


# --- line structure: kept as U+2028/U+2029, given back as line breaks -------------------

LINES = [
    ("one line", "one line"),
    ("Steps:\n\n1. open 7\n2. see it fail", "Steps:\u20291. open 7\u20282. see it fail"),
    ("a\n\n\nb", "a\u2029\u2028b"),
    ("a\n\n\n\nb", "a\u2029\u2029b"),
    ("trailing\n", "trailing\u2028"),
]


@pytest.mark.parametrize(("written", "kept"), LINES)
def test_lines_are_kept_within_the_contract_and_given_back(written: str, kept: str) -> None:
    assert lines_kept(written) == kept
    assert first_control(kept) is None
    assert line_breaks(kept) == written


def test_every_line_break_form_and_tab_is_kept() -> None:
    assert lines_kept("a\r\nb\rc\n\r\nd") == "a\u2028b\u2028c\u2029d"
    assert lines_kept("\tcode") == "    code"
    assert lines_kept("bell\x07") == "bell "


def test_a_tracker_brief_keeps_its_lines_and_a_title_does_not() -> None:
    body = "Steps to reproduce:\r\n\r\n1. open 7\r\n2. see it fail\r\n"
    brief = clean_text(body, 4096, field="brief", task="t", lines=True)
    assert brief == "Steps to reproduce:\u20291. open 7\u20282. see it fail"
    assert check_task_text(brief, 4096, field="brief") == brief
    assert clean_text("two\nlines", 64, field="title", task="t") == "two lines"
