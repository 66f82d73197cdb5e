"""The composition root: everything the service is made of is built here, from one Settings."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.app.areas import default_catalogue, default_mirror_areas, default_projectors
from ledger.app.config import Settings
from ledger.app.core_service import CoreService
from ledger.app.metrics import LedgerMetrics
from ledger.areas.captures.follower import CaptureDirFollower, FollowOptions
from ledger.areas.captures.service import CaptureService
from ledger.areas.health.follower import HealthFollower
from ledger.areas.lineage.service import LineageService
from ledger.areas.observations.service import ObservationService
from ledger.log.errors import UnsafeConfiguration
from ledger.log.private_files import make_private_dir
from ledger.log.projector import Projector
from ledger.log.store import LedgerStore
from ledger.mirror.follower import MirrorFollower, build_follower

log = logging.getLogger(__name__)

CONTROL_TOKEN_FILE = "control-token"


def ensure_control_token(settings: Settings) -> str:
    """The configured control token, or one kept in ``<data-dir>/control-token`` (mode 0600)."""
    if settings.control_token is not None:
        return settings.control_token.get_secret_value()
    path = settings.data_dir / CONTROL_TOKEN_FILE
    make_private_dir(settings.data_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        token = path.read_text().strip()
        if token:
            return token
        raise UnsafeConfiguration(
            f"control token file {path} is empty; delete it to regenerate"
        ) from None
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
    log.warning("created a control token in %s (mode 0600); control routes require it", path)
    return path.read_text().strip()


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
    mirror: MirrorFollower | None = None
    followers: list[CaptureDirFollower] = field(default_factory=list)
    health: HealthFollower | None = None

    async def close(self) -> None:
        for follower in self.followers:
            await follower.stop()
        if self.health is not None:
            await self.health.stop()
        if self.mirror is not None:
            await self.mirror.stop()
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
) -> LedgerStore:
    """The store for ``settings``. ``projectors`` defaults to every projection; a subset is for
    diagnostics only (benchmarks/ingest_server.py): the missing projections go stale."""
    return LedgerStore(
        settings.resolved_database_url,
        default_catalogue(),
        default_projectors() if projectors is None else projectors,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        max_batch=settings.writer_max_batch,
        max_batch_bytes=settings.writer_max_batch_bytes,
        metrics=metrics,
    )


async def open_ledger(settings: Settings, projectors: Sequence[Projector] | None = None) -> Ledger:
    make_private_dir(settings.data_dir)
    control_token = ensure_control_token(settings)
    metrics = LedgerMetrics()
    store = build_store(settings, metrics, projectors)
    await store.open()
    mirror = None
    if settings.mirror_enabled:
        mirror = build_follower(
            store=store,
            mirror_dir=settings.resolved_mirror_dir,
            metrics=metrics,
            areas=default_mirror_areas(),
        )
        await mirror.start()
    followers = [
        CaptureDirFollower(store, directory, options=follow_options(settings), metrics=metrics)
        for directory in settings.follow_capture_dirs
    ]
    for follower in followers:
        await follower.start()
    health = HealthFollower(store, metrics=metrics) if settings.health_findings_enabled else None
    if health is not None:
        await health.start()
    return Ledger(
        settings=settings,
        metrics=metrics,
        store=store,
        core=CoreService(store, events_page_max=settings.events_page_max),
        control_token=control_token,
        captures=CaptureService(store),
        lineage=LineageService(store, metrics=metrics, page_max=settings.events_page_max),
        observations=ObservationService(store),
        mirror=mirror,
        followers=followers,
        health=health,
    )
