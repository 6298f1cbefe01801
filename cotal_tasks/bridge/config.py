"""The bridge's configuration: one TOML file, validated once into typed settings.

Secrets never live in the file: keys ending in ``_env`` name environment variables.
Every error names the key and the remedy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from cotal_tasks.bridge.broker_config import (
    DEFAULT_ENDPOINT,
    BrokerConfig,
    find_endpoint,
    read_toml,
    relative_to,
)
from cotal_tasks.bridge.config_errors import ConfigRefused, problems
from cotal_tasks.bridge.logs import LogFormat, LogLevel
from cotal_tasks.core import ContractError, endpoint_token
from cotal_tasks.core.identity import LIFECYCLE_UID, Principal
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.core.models import BRIEF_BYTES
from cotal_tasks.core.models import Settings as Closed
from cotal_tasks.providers import registry

if TYPE_CHECKING:
    ProviderSettings = BaseModel
else:  # one member per registered provider, told apart by its ``provider`` tag
    ProviderSettings = Annotated[
        Union[tuple(p.settings for p in registry.PROVIDERS)],  # noqa: UP007
        Field(discriminator="provider"),
    ]


class EndpointConfig(Closed):
    """One endpoint the bridge serves.

    In the file, ``provider = "…"`` names the provider and its settings are the table
    ``[endpoints.<section>]`` (``github``, ``gitlab``, ``tower_do``; a board has none).
    Validated, they are ``settings``: one member of a union discriminated by ``provider``.
    """

    name: str = DEFAULT_ENDPOINT
    settings: ProviderSettings = Field(default_factory=lambda: registry.BY_NAME["board"].settings())
    # The board, or a hosted tracker's local mirror. Default: SQLite under data_dir.
    database: str | None = None
    page_ceiling: Annotated[int, Field(ge=1, le=1000)] = 100
    idempotency_retention_hours: Annotated[float, Field(gt=0, le=24 * 30)] = 24.0
    # History entries (who wrote what, with its note) older than this are pruned; 0 keeps
    # them for ever.
    history_retention_days: Annotated[float, Field(ge=0, le=36_500)] = 365.0
    # Per seat (its principal): writes a minute (0: no bound), and the note one write adds.
    writes_per_minute_per_seat: Annotated[int, Field(ge=0, le=100_000)] = 120
    note_max_bytes: Annotated[int, Field(ge=1, le=BRIEF_BYTES)] = BRIEF_BYTES
    require_presence: bool = False
    # How owner/any targets are checked for currency before the handler runs: against the
    # trusted lifecycle head (Cotal's rule), the weaker presence card, or not at all.
    target_check: Literal["lifecycle", "presence", "none"] = "lifecycle"

    @property
    def provider(self) -> str:
        return str(getattr(self.settings, "provider"))  # noqa: B009 (every member has it)

    @model_validator(mode="before")
    @classmethod
    def _provider_section(cls, data: Any) -> Any:
        """``provider`` and its ``[endpoints.<section>]`` table -> ``settings``."""
        if not isinstance(data, dict) or isinstance(data.get("settings"), BaseModel):
            return data  # settings given as a provider's model (in code, not in a file)
        if "settings" in data:
            raise ValueError(
                "settings is not a config key. Set provider and its [endpoints.<section>] "
                "table instead"
            )
        data = dict(data)
        name = data.pop("provider", "board")
        entry = registry.BY_NAME.get(name) if isinstance(name, str) else None
        if entry is None:
            raise ValueError(registry.unknown(name))
        for other in registry.PROVIDERS:
            if other is not entry and other.section is not None and other.section in data:
                raise ValueError(
                    f"an [endpoints.{other.section}] section belongs to provider = "
                    f"{other.name!r}, not {name!r}. Remove the section or set the provider"
                )
        section = data.pop(entry.section, None) if entry.section is not None else None
        if section is None:
            try:
                section = entry.settings()
            except ValidationError:
                raise ValueError(
                    f"provider {name!r} needs an [endpoints.{entry.section}] section. Add it "
                    "(at least the repository, project or board)"
                ) from None
        if isinstance(section, dict):
            section = {**section, "provider": name}
        data["settings"] = section
        return data

    @field_validator("database")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is not None:
            database_form(value)
        return value

    @field_validator("name")
    @classmethod
    def _endpoint_name(cls, value: str) -> str:
        try:
            endpoint_token(value)
        except ContractError as exc:
            raise ValueError(exc.message) from exc
        return value

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


class HttpLimits(Closed):
    """``[http.limits]``: what one peer, or many, may hold of the listener. Past a limit the
    listener sheds load (503 with ``Retry-After``) instead of running out of files."""

    header_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0  # a request's head, whole
    idle_timeout_s: Annotated[int, Field(ge=1, le=300)] = 5  # keep-alive between requests
    body_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0  # a webhook body, whole
    write_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0  # an answer, whole, to a peer
    # The kernel's send buffer of one connection (0: the kernel's own, growing to tcp_wmem's
    # most): what a peer that does not read is written before it is behind.
    send_buffer_bytes: Annotated[int, Field(ge=0, le=64 * 2**20)] = 256 * 1024
    max_connections: Annotated[int, Field(ge=1, le=100_000)] = 256  # open at once, in all
    max_connections_per_peer: Annotated[int, Field(ge=1, le=100_000)] = 64  # of one address
    max_requests: Annotated[int, Field(ge=1, le=10_000)] = 64  # answered at once (no streams)
    max_probe_requests: Annotated[int, Field(ge=1, le=10_000)] = 16  # /healthz, /metrics
    max_webhook_requests: Annotated[int, Field(ge=1, le=10_000)] = 32  # /webhooks/…
    # Deliveries one address may send a second (a second's worth at once); past it each
    # waits its turn (at most PACE_WAIT_S, then 429): a replayed flood is slowed at its
    # source instead of taking the event loop from the wire. 0: no pacing.
    webhook_rate_per_peer: Annotated[float, Field(ge=0, le=100_000)] = 100.0
    max_streams: Annotated[int, Field(ge=0, le=10_000)] = 100  # open event streams, in all
    max_streams_per_token: Annotated[int, Field(ge=0, le=10_000)] = 4  # per caller
    webhook_max_body_bytes: Annotated[int, Field(ge=1024, le=100 * 2**20)] = 25 * 2**20
    retry_after_s: Annotated[int, Field(ge=1, le=3600)] = 5  # what a shed request is told


class HttpConfig(Closed):
    """The HTTP listener: read API, server-sent events, webhooks, health, metrics, dashboard."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080  # 0: any free port
    tokens: tuple[HttpToken, ...] = ()
    # With no tokens, an embedded loopback bridge lets plainly local requests read
    # (tasks.read) when this is on. Off by default: behind a reverse proxy every request
    # looks local. The embedded default (serve with no config file) turns it on.
    local_reader: bool = False
    limits: HttpLimits = HttpLimits()


class LogConfig(Closed):
    """The log: the project's level, the libraries' level, text or JSON lines."""

    level: LogLevel = "info"
    format: LogFormat = "text"
    libraries: LogLevel = "warning"  # httpx, alembic, uvicorn, nats: quiet unless asked


class BridgeConfig(BrokerConfig):
    """The whole file: the broker part (``BrokerConfig``), the listener, the log, and the
    endpoints with their providers' settings."""

    http: HttpConfig = HttpConfig()
    log: LogConfig = LogConfig()
    # The first contact with each tracker at start must be answered within this.
    tracker_connect_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0
    # Each connection to an endpoint's PostgreSQL database must be made within this.
    database_connect_timeout_s: Annotated[float, Field(gt=0, le=300)] = 5.0
    endpoints: Annotated[tuple[EndpointConfig, ...], Field(min_length=1)] = (EndpointConfig(),)

    @field_validator("endpoints")
    @classmethod
    def _unique(cls, value: tuple[EndpointConfig, ...]) -> tuple[EndpointConfig, ...]:
        names = [ep.name for ep in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"endpoint names must be unique; {', '.join(dupes)} repeats")
        return value

    @model_validator(mode="after")
    def _one_database_one_endpoint(self) -> BridgeConfig:
        """Two endpoints on one database would serve one board (its rows carry no
        endpoint): refused here, naming both, before anything opens it."""
        seen: dict[tuple[str, ...], EndpointConfig] = {}
        for index, ep in enumerate(self.endpoints):
            key = database_identity(ep.database_url(self.data_dir))
            first = seen.setdefault(key, ep)
            if first is not ep:
                raise ValueError(
                    f"endpoints {first.name} and {ep.name} name one database "
                    f"({mask_credentials(ep.database_url(self.data_dir))}); a database holds "
                    "one endpoint's board (its rows are not scoped by endpoint, so each would "
                    f"list the other's tasks). Give endpoints.{index}.database a database of "
                    "its own (another file, or another database on the same PostgreSQL server)"
                )
        return self

    def endpoint(self, name: str | None) -> EndpointConfig:
        return find_endpoint(self.endpoints, name)


def database_identity(url: str) -> tuple[str, ...]:
    """What names one database, whatever the URL's spelling: a SQLite file's absolute
    path; a PostgreSQL server's host, port and database (not the user or options)."""
    scheme, _, rest = url.partition("://")
    if scheme.split("+", 1)[0] == "sqlite":
        return ("sqlite", os.path.normpath(os.path.abspath(os.path.expanduser(rest[1:]))))
    parts = urlsplit(url)
    database = parts.path.lstrip("/") or (parts.username or "")
    return (
        "postgresql",
        (parts.hostname or "localhost").lower(),
        str(parts.port or 5432),
        database,
    )


_DATABASE_FORMS = "sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"


def database_form(url: str) -> None:
    """``database``: ``sqlite:///PATH`` or ``postgresql://…`` (the board's two backends)."""
    scheme, sep, rest = url.partition("://")
    backend = scheme.split("+", 1)[0]
    if not sep or backend not in ("sqlite", "postgresql"):
        raise ValueError(
            f"the board supports sqlite and postgresql, not {backend!r}. Use {_DATABASE_FORMS}"
        )
    if backend == "sqlite" and rest.lstrip("/") in ("", ":memory:"):
        raise ValueError(f"a board lives in a file, not in memory. Use {_DATABASE_FORMS}")


def load_config(path: Path | None) -> BridgeConfig:
    """Read and validate ``path``. ``None`` is the embedded default (``make run``): the
    defaults, with the local reader on, so its dashboard reads on loopback with no set-up
    (a config file opts in with ``[http] local_reader = true``)."""
    if path is None:
        return BridgeConfig(http=HttpConfig(local_reader=True))
    raw = read_toml(path)
    try:
        config = BridgeConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigRefused(path, problems(exc, BridgeConfig)) from exc
    return relative_to(config, path)
