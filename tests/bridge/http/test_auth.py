"""Bearer tokens: 401 for a missing or unknown token, 403 for a missing capability, the
caller triple of my-tasks from the token, secrets never echoed or logged; and the local
reader that stands in when no token is configured.

The refusal tables run on the app in process (``in_process.py``: the composition root's
app, no listener, no broker); one row of each runs again on a bridge serving on its socket,
and the tests that read tasks through a caller on the wire stay there."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.config import HttpToken
from cotal_tasks.bridge.http.access import is_loopback_host
from cotal_tasks.bridge.http.auth import _host_name
from cotal_tasks.core import ContractError, ErrorCode
from tests.bridge.http._support import (
    ACME,
    BUILDER,
    NO_UID_ENV,
    OPERATOR,
    OTHER,
    READER_ENV,
    SEAT_ENV,
    SECRETS,
    TOKENS,
    HttpMesh,
    bearer,
    open_http_mesh,
    set_secrets,
)
from tests.bridge.http.in_process import in_process_http

READ_PATHS = (
    "/v1/endpoints",
    f"/v1/endpoints/{ACME}/tasks",
    f"/v1/endpoints/{ACME}/tasks/t-absent",
    f"/v1/endpoints/{ACME}/board",
)
ALL_PATHS = (*READ_PATHS, f"/v1/endpoints/{ACME}/my-tasks")
OPEN_PATHS = ("/", "/static/dashboard.js", "/v1/openapi.json", "/healthz", "/metrics")


@pytest.fixture
async def mesh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[HttpMesh]:
    set_secrets(monkeypatch)
    async with open_http_mesh(tmp_path, tokens=TOKENS) as running:
        yield running


def assert_refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code
    message: str = body["error"]["message"]
    return message


async def status_of(
    http: httpx.AsyncClient, path: str, headers: dict[str, str] | None = None
) -> int:
    if path == "/v1/events":
        async with http.stream("GET", path, headers=headers) as response:
            return response.status_code
    return (await http.get(path, headers=headers)).status_code


@pytest.fixture
async def app_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with the same tokens, in process."""
    set_secrets(monkeypatch)
    async with in_process_http(tmp_path, tokens=TOKENS) as http:
        yield http


def missing_token_refused(response: httpx.Response) -> None:
    message = assert_refused(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in message


@pytest.mark.parametrize("path", ALL_PATHS)
async def test_a_missing_token_is_401(app_http: httpx.AsyncClient, path: str) -> None:
    missing_token_refused(await app_http.get(path))


async def test_on_the_listener_a_missing_token_is_401(mesh: HttpMesh) -> None:
    missing_token_refused(await mesh.get(ALL_PATHS[1]))


async def test_the_event_stream_needs_a_token_too(app_http: httpx.AsyncClient) -> None:
    assert await status_of(app_http, "/v1/events") == 401


BAD_HEADERS = [
    "Bearer not-a-token-this-bridge-knows",
    f"Bearer {SECRETS[READER_ENV]}x",
    f"Bearer {SECRETS[READER_ENV][:-1]}",
    f"Basic {SECRETS[READER_ENV]}",
    "Bearer",
    "bearer-" + SECRETS[READER_ENV],
]


@pytest.mark.parametrize("header", BAD_HEADERS)
async def test_an_unknown_or_malformed_token_is_401(
    app_http: httpx.AsyncClient, header: str
) -> None:
    for path in (*ALL_PATHS, "/v1/events"):
        assert await status_of(app_http, path, {"Authorization": header}) == 401, path


async def test_on_the_listener_an_unknown_token_is_401(mesh: HttpMesh) -> None:
    for path in (ALL_PATHS[0], "/v1/events"):
        assert await status_of(mesh.http, path, {"Authorization": BAD_HEADERS[0]}) == 401


async def test_a_reader_token_reads_but_has_no_tasks_of_its_own(mesh: HttpMesh) -> None:
    headers = bearer(READER_ENV)
    for path in READ_PATHS:
        assert (await mesh.get(path, headers=headers)).status_code in (200, 404), path
    assert await status_of(mesh.http, "/v1/events", headers) == 200
    response = await mesh.get(f"/v1/endpoints/{ACME}/my-tasks", headers=headers)
    message = assert_refused(response, 403, "permission-denied")
    assert "tasks.self" in message


async def test_a_seat_token_reads_only_its_own_tasks(mesh: HttpMesh) -> None:
    operator = mesh.caller(OPERATOR)
    mine = (await operator.ok("create-task", {"title": "mine"}))["taskId"]
    theirs = (await operator.ok("create-task", {"title": "theirs"}))["taskId"]
    await operator.ok("create-task", {"title": "nobody's"})
    await mesh.caller(BUILDER).ok("claim-task", {"taskId": mine}, mode="self")
    await mesh.caller(OTHER).ok("claim-task", {"taskId": theirs}, mode="self")

    headers = bearer(SEAT_ENV)
    page = await mesh.ok(f"/v1/endpoints/{ACME}/my-tasks", headers=headers)
    assert [task["taskId"] for task in page["tasks"]] == [mine]
    wire = await mesh.caller(BUILDER).ok("my-tasks", {}, mode="self")
    assert page["tasks"] == wire["tasks"]
    for path in READ_PATHS:
        response = await mesh.get(path, headers=headers)
        assert "tasks.read" in assert_refused(response, 403, "permission-denied")
    assert await status_of(mesh.http, "/v1/events", headers) == 403


async def test_my_tasks_needs_the_tokens_lifecycle_uid(mesh: HttpMesh) -> None:
    response = await mesh.get(f"/v1/endpoints/{ACME}/my-tasks", headers=bearer(NO_UID_ENV))
    assert "lifecycle_uid" in assert_refused(response, 403, "permission-denied")


async def test_my_tasks_pages_and_refuses_a_status_filter(mesh: HttpMesh) -> None:
    headers = bearer(SEAT_ENV)
    path = f"/v1/endpoints/{ACME}/my-tasks"
    assert (await mesh.get(path, headers=headers, params={"limit": "1"})).status_code == 200
    response = await mesh.get(path, headers=headers, params={"status": "open"})
    assert "status" in assert_refused(response, 400, "bad-request")


@pytest.mark.parametrize("path", OPEN_PATHS)
async def test_the_page_description_health_and_metrics_need_no_token(
    mesh: HttpMesh, path: str
) -> None:
    assert (await mesh.get(path)).status_code == 200


async def test_no_secret_is_echoed_or_logged(
    mesh: HttpMesh, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bodies = []
    for env in (READER_ENV, SEAT_ENV, NO_UID_ENV):
        for path in ALL_PATHS:
            bodies.append((await mesh.get(path, headers=bearer(env))).text)
        wrong = {"Authorization": f"Bearer {SECRETS[env]}-wrong"}
        bodies.append((await mesh.get(READ_PATHS[0], headers=wrong)).text)
    bodies.append((await mesh.get("/metrics")).text)
    bodies.append((await mesh.get("/v1/openapi.json")).text)
    for secret in SECRETS.values():
        assert secret not in caplog.text
        assert not any(secret in body for body in bodies)


async def test_tokens_close_the_local_reader(mesh: HttpMesh) -> None:
    # The bridge runs its embedded broker on loopback, but tokens are configured: no
    # request reads without one.
    assert (await mesh.get(READ_PATHS[0])).status_code == 401


# -- startup refusals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environment", "words"),
    [
        ({}, "not set"),
        ({READER_ENV: ""}, "is set but empty"),
        ({READER_ENV: " x7Qw9x7Qw9x7Qw9x7Qw9"}, "starts or ends with whitespace"),
        ({READER_ENV: "x7Qw9"}, "is 5 characters, at least 16"),
    ],
)
async def test_a_missing_or_weak_secret_stops_the_bridge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], words: str
) -> None:
    monkeypatch.delenv(READER_ENV, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ContractError) as caught:
        async with open_http_mesh(tmp_path, tokens=TOKENS[:1]):
            pass
    assert caught.value.code is ErrorCode.FAILED_PRECONDITION
    assert words in caught.value.message
    assert READER_ENV in caught.value.message
    for value in environment.values():
        if value:
            assert value not in caught.value.message


async def test_two_principals_may_not_share_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(READER_ENV, SECRETS[READER_ENV])
    monkeypatch.setenv("CT_TEST_TWIN", SECRETS[READER_ENV])
    twin = HttpToken(token_env="CT_TEST_TWIN", principal="local.twin")
    with pytest.raises(ContractError) as caught:
        async with open_http_mesh(tmp_path, tokens=(TOKENS[0], twin)):
            pass
    assert "same secret" in caught.value.message


# -- no tokens configured -----------------------------------------------------------------


async def test_no_tokens_on_the_embedded_loopback_bridge_admit_local_readers(
    tmp_path: Path,
) -> None:
    async with open_http_mesh(tmp_path) as mesh:
        for path in READ_PATHS:
            assert (await mesh.get(path)).status_code in (200, 404), path
        assert await status_of(mesh.http, "/v1/events") == 200
        # The local reader is no seat: it has no tasks of its own.
        response = await mesh.get(f"/v1/endpoints/{ACME}/my-tasks")
        assert_refused(response, 403, "permission-denied")
        # Anything that is not plainly local is refused.
        for headers in (
            {"Host": "tasks.example.com"},  # DNS rebinding: a page on another origin
            {"Host": "127.0.0.1.nip.io"},
            {"X-Forwarded-For": "203.0.113.9"},  # through a proxy
            {"Forwarded": "for=203.0.113.9"},
        ):
            response = await mesh.get(READ_PATHS[0], headers=headers)
            assert "not a local one" in assert_refused(response, 401, "unauthenticated")
        # A token, when presented, must be a known one.
        assert (await mesh.get(READ_PATHS[0], headers=bearer(READER_ENV))).status_code == 401


async def test_the_local_reader_is_off_unless_the_operator_turns_it_on(tmp_path: Path) -> None:
    """Finding: behind a default reverse proxy (``proxy_pass`` to 127.0.0.1 rewrites Host
    and adds no forwarding header) every request looked local, so everyone read."""
    async with open_http_mesh(tmp_path, local_reader=False) as mesh:
        # What a proxy on the same host sends: a loopback peer, a loopback Host.
        response = await mesh.get(READ_PATHS[0], headers={"Host": "127.0.0.1"})
        message = assert_refused(response, 401, "unauthenticated")
        assert "local_reader = true" in message
        assert await status_of(mesh.http, "/v1/events") == 401


async def test_no_tokens_on_a_shared_broker_close_the_read_api(tmp_path: Path) -> None:
    async with open_http_mesh(tmp_path, embedded=False) as mesh:
        for path in ALL_PATHS:
            message = assert_refused(await mesh.get(path), 401, "unauthenticated")
            assert "[[http.tokens]]" in message
        assert await status_of(mesh.http, "/v1/events") == 401
        for path in OPEN_PATHS:
            assert (await mesh.get(path)).status_code == 200, path


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("app.localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("127.0.0.1:8080", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
    ],
)
def test_host_header_names(header: str, host: str) -> None:
    assert _host_name(header) == host
