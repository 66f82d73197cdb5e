"""The composition root: everything the service is made of is built here, from one Settings."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.app.areas import (
    default_catalogue,
    default_projectors,
    view_projectors,
    views_follower,
    write_side_projectors,
)
from ledger.app.config import Settings
from ledger.app.core_service import CoreService
from ledger.app.metrics import LedgerMetrics
from ledger.app.projector import ProjectorProcess, build_mirror
from ledger.areas.captures.follower import CaptureDirFollower, FollowOptions
from ledger.areas.captures.service import CaptureService
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.gauges import VerdictGauges
from ledger.areas.lineage.service import LineageService
from ledger.areas.observations.service import ObservationService
from ledger.log import migrate
from ledger.log.checkpoint_key import load_or_create_signing_key, load_signing_key
from ledger.log.checkpoint_publisher import CheckpointPublisher
from ledger.log.engines import Synchronous, create_async_db_engine
from ledger.log.errors import UnsafeConfiguration
from ledger.log.freshness import Freshness
from ledger.log.integrity import store_problems
from ledger.log.private_files import make_private_dir, publish_private_file
from ledger.log.projection_follower import ProjectionFollower
from ledger.log.projector import Projector
from ledger.log.rebuild import (
    RebuildReport,
    ensure_projections_current,
    rebuild_stale_projections,
)
from ledger.log.store import LedgerStore
from ledger.log.witness import WitnessedCheckpoint, latest_in
from ledger.mirror.follower import MirrorFollower

if TYPE_CHECKING:
    from ledger.areas.otel.export_process import OtlpExportProcess
    from ledger.areas.otel.follower import OtlpFollower

T = TypeVar("T")

log = logging.getLogger(__name__)

CONTROL_TOKEN_FILE = "control-token"


def ensure_control_token(settings: Settings) -> str:
    """The configured control token, or one kept in ``<data-dir>/control-token`` (mode 0600)."""
    if settings.control_token is not None:
        return settings.control_token.get_secret_value()
    path = settings.data_dir / CONTROL_TOKEN_FILE
    if not path.exists():
        token = secrets.token_urlsafe(32)
        if publish_private_file(path, (token + "\n").encode()):
            log.warning(
                "created a control token in %s (mode 0600); control routes require it", path
            )
            return token
    token = path.read_text().strip()
    if not token:
        raise UnsafeConfiguration(f"control token file {path} is empty; delete it to regenerate")
    return token


def control_token_path(settings: Settings) -> Path:
    return settings.data_dir / CONTROL_TOKEN_FILE


@dataclass
class Ledger:
    """A running ledger: its store and the services built on it."""

    settings: Settings
    metrics: LedgerMetrics
    store: LedgerStore
    core: CoreService
    control_token: str
    captures: CaptureService
    lineage: LineageService
    observations: ObservationService
    freshness: Freshness
    projector: ProjectionFollower | ProjectorProcess | None = None
    mirror: MirrorFollower | None = None
    followers: list[CaptureDirFollower] = field(default_factory=list)
    health: HealthFollower | VerdictGauges | None = None
    checkpoints: CheckpointPublisher | None = None
    otlp: OtlpFollower | OtlpExportProcess | None = None

    async def close(self) -> None:
        for follower in self.followers:
            await follower.stop()
        if self.otlp is not None:
            await self.otlp.stop()
        if self.health is not None:
            await self.health.stop()
        if self.mirror is not None:
            await self.mirror.stop()
        if self.projector is not None:
            await self.projector.stop()
        if self.checkpoints is not None:
            # After the writers above: the last checkpoint names the head they left.
            await self.checkpoints.stop()
        await self.store.close()


def follow_options(settings: Settings) -> FollowOptions:
    return FollowOptions(
        force_polling=settings.follow_force_polling,
        poll_interval=settings.follow_poll_interval_s,
    )


def build_store(
    settings: Settings,
    metrics: LedgerMetrics | None = None,
    projectors: Sequence[Projector] | None = None,
    *,
    wal_checkpoints: bool = True,
) -> LedgerStore:
    """The store for ``settings``. ``projectors`` defaults to the write side's projections (the
    views follow the log: ``build_projector``); a subset is for diagnostics only
    (benchmarks/ingest_server.py): the missing projections go stale. ``wal_checkpoints``: see
    ``LedgerStore``."""
    return LedgerStore(
        settings.resolved_database_url,
        default_catalogue(),
        write_side_projectors() if projectors is None else projectors,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        max_batch=settings.writer_max_batch,
        max_batch_bytes=settings.writer_max_batch_bytes,
        metrics=metrics,
        read_only=settings.read_only,
        wal_checkpoints=wal_checkpoints,
    )


async def open_ledger(settings: Settings, projectors: Sequence[Projector] | None = None) -> Ledger:
    make_private_dir(settings.data_dir)
    control_token = ensure_control_token(settings)
    metrics = LedgerMetrics()
    # Beside a projector process, its writer copies the WAL back into the file (it writes
    # whenever the log grows): this process's writer then spends its time on appends only.
    store = build_store(
        settings, metrics, projectors, wal_checkpoints=settings.projector == "in-server"
    )
    await store.open()
    # Serving reads only (a store refused at start, kept readable): nothing writes, not even a
    # checkpoint, which would witness a damaged log as the truth.
    writes = not settings.read_only
    checkpoints = None
    if settings.checkpoints_enabled and writes:
        checkpoints = CheckpointPublisher(
            store,
            load_or_create_signing_key(settings.resolved_checkpoint_key_file),
            settings.witness_files,
            interval_s=settings.checkpoint_interval_s,
            metrics=metrics,
        )
        await checkpoints.start()
    # The followers of the log run in the projector process when there is one (projector.py):
    # the mirror's files and the health checks are derived behind the acknowledgement, off
    # this process's CPU.
    in_server = settings.projector == "in-server"
    mirror = None
    if settings.mirror_enabled and writes and in_server:
        mirror = build_mirror(settings, store)
        await mirror.start()
    followers = [
        CaptureDirFollower(store, directory, options=follow_options(settings), metrics=metrics)
        for directory in settings.follow_capture_dirs
        if writes
    ]
    for follower in followers:
        await follower.start()
    health: HealthFollower | VerdictGauges | None = None
    home = settings.health_follower_home
    if home is not None and writes:
        # Where another process runs the follower (the projector, or the proxy's capture
        # process), the gauges are read here.
        health = (
            HealthFollower(store, metrics=metrics)
            if home == "server"
            else VerdictGauges(store, metrics)
        )
        await health.start()
    projector = build_projector(settings, store) if writes else None
    if projector is not None:
        await projector.start()
    freshness = Freshness(
        store,
        [view.name for view in view_projectors()],
        bound_s=settings.views_wait_s,
        moved=projector.moved if isinstance(projector, ProjectionFollower) else None,
        ask=None if projector is None else projector.look_now,
        # Serving reads only, nothing moves the views: a read answers with what they hold.
        waits=writes,
    )
    otlp = build_otlp_export(settings, store, metrics) if writes else None
    if otlp is not None:
        await otlp.start()
    return Ledger(
        settings=settings,
        metrics=metrics,
        store=store,
        core=CoreService(store, events_page_max=settings.events_page_max),
        control_token=control_token,
        captures=CaptureService(store, freshness),
        lineage=LineageService(store, metrics=metrics, page_max=settings.events_page_max),
        observations=ObservationService(store, freshness),
        freshness=freshness,
        projector=projector,
        mirror=mirror,
        followers=followers,
        health=health,
        checkpoints=checkpoints,
        otlp=otlp,
    )


def build_projector(
    settings: Settings, store: LedgerStore
) -> ProjectionFollower | ProjectorProcess:
    """What keeps the views current: the projector process (the default) or, in-server, a
    follower on this process's own store."""
    if settings.projector == "process":
        return ProjectorProcess(settings)
    return views_follower(store, look_every_s=settings.views_look_every_s)


async def catch_up_views(store: LedgerStore) -> int:
    """Bring the views to the head now (a command that wrote with no server running:
    ``ledger import``, the CLI's writes); the events applied."""
    return await views_follower(store).catch_up()


def build_otlp_export(
    settings: Settings, store: LedgerStore, metrics: LedgerMetrics
) -> OtlpFollower | OtlpExportProcess | None:
    """The OTLP export when an endpoint is set: in a niced process of its own (the default), or
    a follower in this one. Its collector headers are read from the environment when it starts
    (areas/otel/sender.py), by the process from the environment it inherits."""
    if settings.otlp_endpoint is None:
        return None
    # Imported only when an endpoint is set: a server with the export off does not load its
    # protobuf encoding.
    from ledger.areas.otel.export_process import OtlpExportProcess
    from ledger.areas.otel.export_worker import ExportOptions
    from ledger.areas.otel.follower import OtlpFollower
    from ledger.areas.otel.mapping import MappingOptions
    from ledger.areas.otel.sender import OtlpSender, headers_from_environment

    try:
        headers = headers_from_environment()
    except ValueError as exc:
        raise UnsafeConfiguration(str(exc)) from None
    if settings.otlp_process:
        return OtlpExportProcess(
            ExportOptions(
                url=settings.resolved_database_url,
                synchronous=settings.synchronous,
                busy_timeout_ms=settings.busy_timeout_ms,
                nice=settings.otlp_nice,
                endpoint=settings.otlp_endpoint,
                content=settings.otlp_content,
                settle_s=settings.otlp_settle_s,
                batch_spans=settings.otlp_batch_spans,
                page_rollouts=settings.otlp_page_rollouts,
            ),
            store,
            metrics,
        )
    return OtlpFollower(
        store,
        OtlpSender(settings.otlp_endpoint, headers=headers),
        options=MappingOptions(content=settings.otlp_content),
        metrics=metrics,
        batch_spans=settings.otlp_batch_spans,
        page_rollouts=settings.otlp_page_rollouts,
        settle_seconds=settings.otlp_settle_s,
    )


@asynccontextmanager
async def opened_store(settings: Settings) -> AsyncIterator[LedgerStore]:
    """The store, open for the length of a command (``ledger import``, ``retire``, ...). What
    the command wrote is in the views when it ends, whether or not a server runs a projector."""
    store = build_store(settings)
    await store.open()
    try:
        yield store
        await catch_up_views(store)
    finally:
        await store.close()


@dataclass(frozen=True)
class DatabaseReader:
    """Read access for a command that needs no writer (``verify``, ``export``, ``events``,
    the mirror's status): the engine, and ``read()``, one read-only snapshot."""

    engine: AsyncEngine

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    async def read_sync(self, fn: Callable[[Connection], T]) -> T:
        """A synchronous read in one snapshot, through the async engine."""
        async with self.read() as conn:
            return await conn.run_sync(fn)


@asynccontextmanager
async def opened_reader(
    settings: Settings, *, pooled: bool = False, read_only: bool = True
) -> AsyncIterator[DatabaseReader]:
    """A reader on the settings' database, disposed on exit. ``pooled`` keeps one connection
    for reads in a row (an export's pages); otherwise each read opens its own, so a long
    command never holds one. ``read_only=False`` only for the mirror's own checkpoint row."""
    engine = create_async_db_engine(
        settings.resolved_database_url,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        read_only=read_only,
        pool_size=1,
        null_pool=not pooled,
    )
    try:
        yield DatabaseReader(engine)
    finally:
        await engine.dispose()


async def upgrade_database(
    url: str,
    revision: str = "head",
    *,
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 30_000,
    progress: Callable[[int], None] | None = None,
    build_views: bool = True,
) -> RebuildReport | None:
    """Migrate to ``revision``; at head, also deal with any projection whose rows are not the
    running code's (log/rebuild.py): the write side rebuilt in place, the views emptied. With
    ``build_views`` the views are then followed to the head here, a page at a time (appends of
    a running server go on between pages); without (``serve --upgrade``), the server's
    projector rebuilds them while it serves. None: not at head, nothing rebuilt."""
    await migrate.upgrade(url, revision)
    if await migrate.current_revision(url) != migrate.head_revision():
        return None
    report = await rebuild_stale_projections(
        url,
        default_catalogue(),
        default_projectors(),
        synchronous=synchronous,
        busy_timeout_ms=busy_timeout_ms,
        progress=progress,
    )
    if report.views_reset and build_views:
        started = time.perf_counter()
        store = LedgerStore(
            url,
            default_catalogue(),
            write_side_projectors(),
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
        )
        await store.open()
        try:
            report.views_events = await catch_up_views(store)
        finally:
            await store.close()
        report.views_seconds = time.perf_counter() - started
    return report


async def upgrade_with_settings(
    settings: Settings, revision: str = "head", *, build_views: bool = True
) -> RebuildReport | None:
    return await upgrade_database(
        settings.resolved_database_url,
        revision,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        build_views=build_views,
    )


async def store_integrity_problems(settings: Settings) -> list[str]:
    """What the start of ``serve`` and ``db check`` refuse a store for (log/integrity.py): FAIL
    lines, empty when it is fit to serve."""
    latest = [
        WitnessedCheckpoint(checkpoint, str(path))
        for path in settings.witness_files
        if (checkpoint := latest_in(path)) is not None
    ]
    key_file = settings.resolved_checkpoint_key_file
    key = load_signing_key(key_file)
    problems = []
    if latest and key is None:
        problems.append(
            f"checkpoints exist ({latest[0].source}) but the key that signed them "
            f"({key_file}) is missing: restore the key, or set the witness file aside if the "
            "key was replaced on purpose"
        )
    async with opened_reader(settings) as reader, reader.engine.connect() as conn:
        problems += await conn.run_sync(
            lambda sync: store_problems(
                sync,
                quick_check=settings.integrity_check,
                latest=latest,
                public_key=None if key is None else key.public_key(),
            )
        )
    return problems


async def ensure_database_ready(url: str) -> None:
    """Raise ``DatabaseNotAtHead`` (or its ``ProjectionsStale``) unless the schema is at head
    and every projection was built by the running code: what ``serve`` and ``db check`` need."""
    await migrate.ensure_at_head(url)
    await ensure_projections_current(url, default_projectors())
