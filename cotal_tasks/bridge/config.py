"""The bridge's configuration: one TOML file, validated once into typed settings.

Secrets never live in the file: keys ending in ``_env`` name environment variables.
Every error names the key and the remedy.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from cotal_tasks.core import ContractError, ErrorCode, endpoint_token
from cotal_tasks.core.identity import LIFECYCLE_UID, OWNER_OR_ACTOR, Principal
from cotal_tasks.providers.hosted.config import Closed, GitHubConfig, GitLabConfig
from cotal_tasks.providers.tower_do.config import TowerDoConfig

DEFAULT_ENDPOINT = "com.example.tasks"


class EndpointConfig(Closed):
    """One endpoint the bridge serves."""

    name: str = DEFAULT_ENDPOINT
    provider: Literal["board", "github", "gitlab", "tower-do"] = "board"
    # The board, or a hosted tracker's local mirror. Default: SQLite under data_dir.
    database: str | None = None
    page_ceiling: Annotated[int, Field(ge=1, le=1000)] = 100
    idempotency_retention_hours: Annotated[float, Field(gt=0, le=24 * 30)] = 24.0
    require_presence: bool = False
    # How owner/any targets are checked for currency before the handler runs: against the
    # trusted lifecycle head (Cotal's rule), the weaker presence card, or not at all.
    target_check: Literal["lifecycle", "presence", "none"] = "lifecycle"
    github: GitHubConfig | None = None
    gitlab: GitLabConfig | None = None
    tower_do: TowerDoConfig | None = None

    @field_validator("name")
    @classmethod
    def _endpoint_name(cls, value: str) -> str:
        try:
            endpoint_token(value)
        except ContractError as exc:
            raise ValueError(exc.message) from exc
        return value

    @model_validator(mode="after")
    def _provider_section(self) -> EndpointConfig:
        for provider, section in (("github",) * 2, ("gitlab",) * 2, ("tower-do", "tower_do")):
            has = getattr(self, section) is not None
            if self.provider == provider and not has:
                raise ValueError(
                    f"provider {provider!r} needs an [endpoints.{section}] section "
                    "(at least the repository, project or board)"
                )
            if self.provider != provider and has:
                raise ValueError(
                    f"an [endpoints.{section}] section belongs to provider = {provider!r}, "
                    f"not {self.provider!r}"
                )
        return self

    def database_url(self, data_dir: Path) -> str:
        if self.database is not None:
            return self.database
        return f"sqlite:///{data_dir / (endpoint_token(self.name) + '.db')}"


class HttpToken(Closed):
    """A bearer token for the read API, mapped to a principal and its capabilities."""

    token_env: Annotated[str, Field(min_length=1)]
    principal: Principal
    lifecycle_uid: Annotated[str, Field(pattern=LIFECYCLE_UID.pattern)] | None = None
    capabilities: tuple[Literal["tasks.read", "tasks.self"], ...] = ("tasks.read",)


class HttpConfig(Closed):
    """The HTTP listener: read API, server-sent events, webhooks, health, metrics, dashboard."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080  # 0: any free port
    tokens: tuple[HttpToken, ...] = ()


class BridgeConfig(Closed):
    space: Annotated[str, Field(min_length=1, max_length=128)] = "demo"
    owner: Annotated[str, Field(pattern=OWNER_OR_ACTOR.pattern)] = "local"
    data_dir: Path = Path(".cotal-tasks")
    nats_url: str | None = None  # absent: start an embedded nats-server
    nats_credentials: Path | None = None  # a NATS .creds file for the bridge's serve credential
    nats_user: str | None = None
    nats_password_env: str | None = None  # the environment variable holding nats_user's password
    http: HttpConfig = HttpConfig()
    endpoints: Annotated[tuple[EndpointConfig, ...], Field(min_length=1)] = (EndpointConfig(),)

    @field_validator("endpoints")
    @classmethod
    def _unique(cls, value: tuple[EndpointConfig, ...]) -> tuple[EndpointConfig, ...]:
        names = [ep.name for ep in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"endpoint names must be unique; {', '.join(dupes)} repeats")
        return value

    def endpoint(self, name: str | None) -> EndpointConfig:
        if name is None:
            return self.endpoints[0]
        for ep in self.endpoints:
            if ep.name == name:
                return ep
        known = ", ".join(ep.name for ep in self.endpoints)
        raise ContractError(
            ErrorCode.NOT_FOUND, f"no endpoint {name!r} in the config. Name one it serves: {known}"
        )


def load_config(path: Path | None) -> BridgeConfig:
    """Read and validate ``path`` (or the defaults when ``None``)."""
    if path is None:
        return BridgeConfig()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"cannot read config {path}: {exc.strerror}. Check the path"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"config {path} is not valid TOML ({exc}). Fix the syntax"
        ) from exc
    try:
        config = BridgeConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: "
            f"{err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"config {path} is refused: {problems}. Fix those settings"
        ) from exc
    if not config.data_dir.is_absolute():
        config = config.model_copy(update={"data_dir": (path.parent / config.data_dir)})
    return config
