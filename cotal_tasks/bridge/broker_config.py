"""The part of the config a caller needs to reach the bridge: the space, the broker and its
credentials, the data directory (where the embedded broker's URL is found), and the
endpoints' names. ``BridgeConfig`` is built on it; the CLI's ``describe``, ``invoke`` and
``mcp`` read the file through ``load_caller_config``, which ignores the rest, so they load
none of the providers.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Protocol, TypeVar
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationError, field_validator

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.identity import OWNER_OR_ACTOR
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.core.models import Settings as Closed  # not the providers': mcp loads none

DEFAULT_ENDPOINT = "com.example.tasks"
C = TypeVar("C", bound="BrokerConfig")


class BrokerConfig(Closed):
    """The space, where its broker is, and how the bridge signs in to it."""

    space: Annotated[str, Field(min_length=1, max_length=128)] = "demo"
    owner: Annotated[str, Field(pattern=OWNER_OR_ACTOR.pattern)] = "local"
    data_dir: Path = Path(".cotal-tasks")
    nats_url: str | None = None  # absent: start an embedded nats-server
    nats_credentials: Path | None = None  # a NATS .creds file for the bridge's serve credential
    nats_user: str | None = None
    nats_password_env: str | None = None  # the environment variable holding nats_user's password
    # The first connection to the broker must succeed within this; later losses are retried.
    nats_connect_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, value: str | None) -> str | None:
        if value is not None:
            nats_form(value)
        return value


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


class NamedEndpoint(Closed):
    """An endpoint as a caller sees it: its name (the rest of its table is not read)."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)
    name: str = DEFAULT_ENDPOINT


class CallerConfig(BrokerConfig):
    """What ``describe``, ``invoke`` and ``mcp`` read of the file."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)
    endpoints: tuple[NamedEndpoint, ...] = (NamedEndpoint(),)

    def endpoint(self, name: str | None) -> NamedEndpoint:
        return find_endpoint(self.endpoints or (NamedEndpoint(),), name)


def find_endpoint(endpoints: Sequence[N], name: str | None) -> N:
    """The endpoint named ``name`` (``None``: the first), else ``not-found`` naming them."""
    if name is None:
        return endpoints[0]
    for ep in endpoints:
        if ep.name == name:
            return ep
    known = ", ".join(ep.name for ep in endpoints)
    raise ContractError(
        ErrorCode.NOT_FOUND, f"no endpoint {name!r} in the config. Name one it serves: {known}"
    )


def read_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"cannot read config {path}: {exc.strerror}. Check the path"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"config {path} is not valid TOML ({exc}). Fix the syntax"
        ) from exc


def relative_to(config: C, path: Path) -> C:
    """A relative ``data_dir`` is relative to the config file's folder."""
    if config.data_dir.is_absolute():
        return config
    return config.model_copy(update={"data_dir": path.parent / config.data_dir})


def load_caller_config(path: Path | None) -> CallerConfig:
    """The caller's part of ``path`` (defaults when ``None``); ``check-config`` checks the rest."""
    if path is None:
        return CallerConfig()
    try:
        config = CallerConfig.model_validate(read_toml(path))
    except ValidationError as exc:
        found = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"config {path} is refused: {found}. Fix those settings"
        ) from exc
    return relative_to(config, path)


_NATS_SCHEMES = ("nats", "tls", "ws", "wss")


def nats_form(url: str) -> None:
    """``nats_url``: one or more comma-separated ``nats://HOST:PORT`` (or tls, ws, wss)."""
    for part in server_parts(url):
        try:
            parsed = urlsplit(part if "://" in part else f"nats://{part}")
            port = parsed.port
        except ValueError:
            port, parsed = -1, urlsplit("")
        if parsed.scheme not in _NATS_SCHEMES or not parsed.hostname or port == -1:
            raise ValueError(
                f"{mask_credentials(part)!r} is not a broker URL. Give nats://HOST:PORT "
                "(or tls://, ws://, wss://), several separated by commas"
            )


def server_parts(url: str) -> list[str]:
    """``nats_url`` may list several nodes of a cluster, comma-separated, nearest first."""
    return [part.strip() for part in url.split(",") if part.strip()]
