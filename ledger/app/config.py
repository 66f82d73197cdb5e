"""One typed settings object, built explicitly by the caller (never at import time)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ledger.log.engines import sqlite_url
from ledger.log.errors import UnsafeConfiguration
from ledger.log.witness import WITNESS_FILE

DEFAULT_PORT = 8420
MAX_JSON_DEPTH_CEILING = 192


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Everything the service reads from its environment (prefix ``LEDGER_``)."""

    model_config = SettingsConfigDict(env_prefix="LEDGER_", extra="ignore")

    data_dir: Path = Path("ledger-data")
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default sqlite+aiosqlite:///<data_dir>/ledger.db",
    )
    mirror_dir: Path | None = Field(default=None, description="default <data_dir>/mirror")
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    control_token: SecretStr | None = None
    ingest_token: SecretStr | None = None
    read_token: SecretStr | None = None
    # Accepted on /metrics besides the read token (docs/operations.md, "Tokens").
    metrics_token: SecretStr | None = None
    insecure: bool = Field(
        default=False, description="allow a non-loopback bind without ingest/read tokens"
    )
    writer_max_batch: int = Field(default=512, ge=1, le=100_000)
    writer_max_batch_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    busy_timeout_ms: int = Field(default=30_000, ge=0)
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Bodies over 1 MiB share this many bytes in flight (http/large_bodies.py); at least the
    # body limit, so one body at the limit always fits.
    large_bodies_in_flight_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    events_page_max: int = Field(default=1000, ge=1)
    mirror_enabled: bool = True
    # Who keeps the views current (ledger/app/projector.py): a process of its own beside the
    # server, or a task of the server's own process.
    projector: Literal["process", "in-server"] = Field(
        default="process", description="run the projector in a process of its own, or in-server"
    )
    # How long a rollout's read waits for the views to reach its last event (log/freshness.py).
    views_wait_s: float = Field(
        default=10.0, ge=0, le=3600, description="seconds a read waits for the views"
    )
    # How often the views' follower looks at the log when it has no full page to apply
    # (log/projection_follower.py); a read that waits for the views asks it to look at once.
    views_look_every_s: float = Field(
        default=0.1, gt=0, le=60, description="seconds between the views' looks at the log"
    )
    # The health follower (areas/health/follower.py) keeps health_findings current in serve.
    health_findings_enabled: bool = True
    # `ledger sql`: a query left running pins a read snapshot (the WAL grows behind it).
    sql_timeout_s: float = Field(default=30.0, gt=0, le=86_400)
    sql_max_rows: int = Field(default=10_000, ge=1)
    # The capture proxy (docs/proxy.md): NAME -> URL, the first is the default upstream.
    upstreams: dict[str, str] = Field(default_factory=dict)
    # NAME -> the environment variable holding that upstream's API key (never the key itself).
    upstream_key_envs: dict[str, str] = Field(default_factory=dict)
    proxy_max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    proxy_max_response_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    proxy_connect_timeout_s: float = Field(default=10.0, gt=0)
    # The longest silence from the upstream (and wait for a free connection): shorter than the
    # OpenAI and Anthropic SDKs' own 600 s, so a hung upstream is the proxy's 504 (retried by
    # the SDK), not the client's timeout; long enough for a long non-streaming answer, silent
    # until it is whole (docs/proxy.md).
    proxy_read_timeout_s: float = Field(default=300.0, gt=0)
    proxy_max_connections: int = Field(default=512, ge=1)
    # Captures appended by a niced process beside the server (areas/proxy/capture_process.py).
    proxy_capture_process: bool = Field(
        default=True, description="append the proxy's captures in a process of their own"
    )
    proxy_capture_nice: int = Field(
        default=10, ge=0, le=19, description="how much lower the capture process's CPU priority is"
    )
    # The ceiling keeps every accepted body readable back: stored records nest a capture a few
    # levels deeper, and pydantic's JSON reader stops at 200 levels (docs/decisions.md).
    max_json_depth: int = Field(
        default=128, ge=2, le=MAX_JSON_DEPTH_CEILING, description="deepest nesting of a body"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header names accepted besides the loopback names (JSON list)",
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="seconds a connection has to send a request's headers"
    )
    body_timeout_s: float = Field(
        default=60.0, gt=0, description="seconds a request has to send its whole body"
    )
    keep_alive_timeout_s: float = Field(default=5.0, gt=0)
    max_connections: int = Field(
        default=1000, ge=1, description="open connections (and requests) before 503"
    )
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    # The interpreter's switch interval in a server process (docs/operations.md, "Serving").
    switch_interval_ms: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description="how long a thread may hold the GIL while another waits for it (ms)",
    )

    # Signed checkpoints of the log's head, kept by witnesses outside the database
    # (log/checkpoints.py; docs/operations.md, "Checkpoints").
    checkpoints_enabled: bool = True
    checkpoint_interval_s: float = Field(
        default=5.0, gt=0, le=3600, description="seconds between checkpoints of a moving head"
    )
    checkpoint_key_file: Path | None = Field(
        default=None, description="Ed25519 signing key (PEM); default <data_dir>/checkpoint-key.pem"
    )
    checkpoint_witness_dirs: list[Path] = Field(
        default_factory=list,
        description="more directories (another disk) that keep checkpoints.jsonl (JSON list)",
    )
    # The start of `serve` and `db check`: SQLite's page check (docs/operations.md).
    integrity_check: bool = Field(
        default=True, description="run PRAGMA quick_check before serving (--skip-integrity-check)"
    )
    read_only: bool = Field(
        default=False, description="serve reads only: no writer, no followers (--read-only)"
    )

    # Gym capture directories `ledger serve` follows live (docs/operations.md, "Following").
    follow_capture_dirs: list[Path] = Field(default_factory=list)
    follow_force_polling: bool = Field(
        default=False, description="poll followed dirs even where inotify works (NFS)"
    )
    follow_poll_interval_s: float = Field(default=0.25, gt=0, le=60)
    # How long an admitted call (lineage row or intent) may go without its capture before the
    # ledger names it missing instead of pending (docs/gym.md, "What the ledger reconciles").
    capture_grace_s: float = Field(
        default=5.0, ge=0, le=86_400, description="seconds a live call's capture may take"
    )

    # The continuous OTLP export (docs/otel.md): the collector's URL (its headers come from
    # LEDGER_OTLP_HEADERS when the server starts, and are never part of the settings).
    otlp_endpoint: str | None = Field(
        default=None, description="send rollouts as OTLP traces to this collector (http(s) URL)"
    )
    otlp_content: bool = Field(
        default=False, description="include requests, responses and tool outputs in the spans"
    )
    otlp_settle_s: float = Field(
        default=1.0, ge=0, le=3600, description="seconds a changed rollout waits before export"
    )
    otlp_batch_spans: int = Field(default=512, ge=1, le=100_000)
    otlp_page_rollouts: int = Field(
        default=200, ge=1, le=10_000, description="rollouts read, sent and checkpointed at once"
    )
    # The exporter in a niced process beside the server (areas/otel/export_process.py).
    otlp_process: bool = Field(
        default=True, description="run the OTLP export in a process of its own"
    )
    otlp_nice: int = Field(
        default=19, ge=0, le=19, description="how much lower the export process's CPU priority is"
    )

    @model_validator(mode="after")
    def _check_otlp_endpoint(self) -> Settings:
        if self.otlp_endpoint is not None:
            from ledger.areas.otel.sender import traces_url

            traces_url(self.otlp_endpoint)  # a ValueError: pydantic names the setting
        return self

    @model_validator(mode="after")
    def _normalise_empty_tokens(self) -> Settings:
        # An empty token in the environment means "unset", never "accept an empty bearer".
        for name in ("control_token", "ingest_token", "read_token", "metrics_token"):
            value = getattr(self, name)
            if value is not None and not value.get_secret_value():
                setattr(self, name, None)
        return self

    @model_validator(mode="after")
    def _check_upstreams(self) -> Settings:
        from ledger.areas.proxy.upstreams import check_key_envs, check_upstreams

        check_upstreams(self.upstreams)
        check_key_envs(self.upstream_key_envs, self.upstreams)
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return sqlite_url((self.data_dir / "ledger.db").resolve())

    @property
    def resolved_checkpoint_key_file(self) -> Path:
        if self.checkpoint_key_file is not None:
            return self.checkpoint_key_file
        return self.data_dir / "checkpoint-key.pem"

    @property
    def witness_files(self) -> list[Path]:
        """Where checkpoints are published: beside the data, and in each extra witness dir."""
        return [self.data_dir / WITNESS_FILE] + [
            directory / WITNESS_FILE for directory in self.checkpoint_witness_dirs
        ]

    @property
    def resolved_mirror_dir(self) -> Path:
        return self.mirror_dir if self.mirror_dir is not None else self.data_dir / "mirror"

    @property
    def health_follower_home(self) -> Literal["projector", "capture process", "server"] | None:
        """Which process of ``ledger serve`` keeps health_findings current: the projector
        process when there is one (it follows the log), else the proxy's capture process when
        that runs (off the forwarding loop), else the server itself; None when it is off."""
        if not self.health_findings_enabled:
            return None
        if self.projector == "process":
            return "projector"
        if self.proxy_capture_process and self.upstreams:
            return "capture process"
        return "server"

    @property
    def accepted_host_names(self) -> list[str]:
        """Host header names accepted besides loopback: ``allowed_hosts`` and the bind
        address itself when it is one specific address (not a wildcard)."""
        names = list(self.allowed_hosts)
        if self.host not in ("0.0.0.0", "::", "[::]", ""):
            names.append(
                self.host if ":" not in self.host.strip("[]") else f"[{self.host.strip('[]')}]"
            )
        return names

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")

    def check_bind_is_safe(self) -> None:
        """Refuse to expose unauthenticated /v1 routes beyond loopback."""
        if is_loopback_host(self.host) or self.insecure:
            return
        missing = [
            env
            for env, value in (
                ("LEDGER_INGEST_TOKEN", self.ingest_token),
                ("LEDGER_READ_TOKEN", self.read_token),
            )
            if value is None
        ]
        if missing:
            raise UnsafeConfiguration(
                f"refusing to bind non-loopback host {self.host!r} without "
                f"{' and '.join(missing)}; set them or pass --insecure"
            )
