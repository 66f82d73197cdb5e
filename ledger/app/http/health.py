"""Operations: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ledger.app.http.deps import LedgerDep
from ledger.log import migrate
from ledger.log.errors import LedgerError

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(ledger: LedgerDep) -> JSONResponse:
    """Ready when the database answers and its schema is at the head revision."""
    try:
        # The revision first: an unmigrated database must say so, not "no such table".
        await migrate.ensure_at_head(ledger.settings.resolved_database_url)
        await ledger.store.head_seq()
    except LedgerError as exc:
        return JSONResponse({"status": "unavailable", "detail": exc.message}, status_code=503)
    except Exception as exc:  # the database itself is unreachable
        return JSONResponse(
            {"status": "unavailable", "detail": f"database unreachable: {exc}"}, status_code=503
        )
    return JSONResponse({"status": "ready", "revision": migrate.head_revision()})


@router.get("/metrics")
async def metrics(ledger: LedgerDep) -> Response:
    return Response(ledger.metrics.render(), media_type=CONTENT_TYPE_LATEST)
