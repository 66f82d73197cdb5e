"""Operations: liveness, readiness (open: load balancers ask them), Prometheus metrics (behind
the read or metrics token when one is set)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ledger.app.bootstrap import Ledger
from ledger.app.http.auth import MetricsAuth
from ledger.app.http.deps import LedgerDep
from ledger.areas.evidence.findings import CAPTURE_MISSING, CAPTURE_PENDING, LINEAGE_ROW_MISSING
from ledger.areas.evidence.service import EvidenceService
from ledger.areas.otel.source import read_export_lag
from ledger.log import migrate
from ledger.log.errors import LedgerError
from ledger.log.projection_versions import stale_projections_async
from ledger.log.rebuild import stale_error
from ledger.log.view_failures import ViewFailure
from ledger.mirror.checkpoint import read_lag

log = logging.getLogger(__name__)
router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(ledger: LedgerDep) -> JSONResponse:
    """Ready when the database answers, its schema is at the head revision and every
    projection the server runs was built by its code (log/projection_versions.py)."""
    damaged = ledger.store.writer.damaged
    if damaged is not None:
        return JSONResponse(
            {"status": "unavailable", "detail": f"the database is damaged: {damaged}"},
            status_code=503,
        )
    try:
        async with ledger.store.read() as conn:
            # The revision first: an unmigrated database must say so, not "no such table".
            await migrate.ensure_connection_at_head(conn)
            stale = await stale_projections_async(conn, ledger.store.projectors)
        if stale:
            raise stale_error(stale)
        await ledger.store.head_seq()
    except LedgerError as exc:
        return JSONResponse({"status": "unavailable", "detail": exc.message}, status_code=503)
    except Exception as exc:  # the database itself is unreachable
        return JSONResponse(
            {"status": "unavailable", "detail": f"database unreachable: {exc}"}, status_code=503
        )
    views = await ledger.freshness.progress()
    body: dict[str, object] = {
        "status": "ready",
        "revision": migrate.head_revision(),
        # The views follow the log: how far they are (the projector catches up after a burst),
        # and the event that stopped them, if one did. Still ready: appends go on, and every
        # server of the database shares the views (docs/decisions.md, follow-the-log 18).
        "views": {
            "projected_seq": views.projected,
            "head_seq": views.head,
            "behind": views.behind,
            "failing": None if views.failing is None else _failing_json(views.failing),
            # An upgrade emptied the views: they are rebuilt from seq 0 up to this seq.
            "rebuilding_until": views.rebuild_until,
        },
    }
    if ledger.store.read_only:
        body["mode"] = "read-only"
    return JSONResponse(body)


def _failing_json(failing: ViewFailure) -> dict[str, object]:
    return {
        "seq": failing.seq,
        "error": failing.error,
        "failures": failing.failures,
        "since": failing.first_failed_at.isoformat(),
    }


@router.get("/metrics")
async def metrics(ledger: LedgerDep, _auth: MetricsAuth) -> Response:
    await _read_views_progress(ledger)
    if ledger.settings.mirror_enabled and not ledger.store.read_only:
        # Kept by the projector process or in this one: the database says how far it is.
        await _read_mirror_lag(ledger)
    if ledger.otlp is not None:
        await _read_otlp_lag(ledger)
    # Pending and missing depend on the clock, so they are counted now, not kept.
    evidence = EvidenceService(ledger.store.read_sync, ledger.settings.capture_grace_s)
    try:
        coverage = await evidence.coverage()
    except Exception:  # the database failed us: the other metrics still answer
        log.exception("/metrics: the call evidence counts could not be read")
    else:
        ledger.metrics.set_call_evidence(
            {
                CAPTURE_PENDING: coverage["pending"],
                CAPTURE_MISSING: coverage["missing"],
                LINEAGE_ROW_MISSING: coverage["captures_without_row"],
            }
        )
    return Response(ledger.metrics.render(), media_type=CONTENT_TYPE_LATEST)


async def _read_views_progress(ledger: Ledger) -> None:
    """How far the views are, as the database says now (the projector may be a process)."""
    try:
        views = await ledger.freshness.progress()
    except Exception:
        log.warning("metrics: the views' progress could not be read", exc_info=True)
        return
    failing_seq = 0 if views.failing is None else views.failing.seq
    ledger.metrics.set_views_progress(views.projected, views.behind, failing_seq)


async def _read_otlp_lag(ledger: Ledger) -> None:
    """The OTLP export's lag from its saved checkpoint (as the mirror's, above)."""
    try:
        lag = await ledger.store.read_sync(read_export_lag)
    except Exception:
        log.warning("metrics: the OTLP export lag could not be read", exc_info=True)
        return
    ledger.metrics.set_otlp_lag(lag.rollouts, lag.seconds(datetime.now(UTC)))


async def _read_mirror_lag(ledger: Ledger) -> None:
    """The mirror's lag as the database says it now (checkpoint and head, one snapshot). A
    value the follower set would be stale exactly when it matters: while it recovers (a
    rewrite of every touched rollout, which may take a while) or keeps failing, it sets
    nothing."""
    try:
        async with ledger.store.read() as conn:
            lag = await read_lag(conn)
    except Exception:
        # /metrics keeps answering when the database does not (/readyz says why); the lag
        # gauges keep their last value.
        log.warning("metrics: the mirror lag could not be read", exc_info=True)
        return
    ledger.metrics.set_mirror_lag(lag.events, lag.seconds(datetime.now(UTC)))
