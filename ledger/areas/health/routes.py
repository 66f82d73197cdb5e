"""Health routes: one rollout's verdict, a selection's quality summary (as Gym's envelope or
Gym's exact files), its perf summary."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from ledger.app.http.auth import ReadAuth
from ledger.app.http.deps import FreshRolloutIdDep, LedgerDep, ProjectedViewsDep
from ledger.app.http.openapi import error_responses
from ledger.areas.evidence.service import EvidenceService
from ledger.areas.health.selection import GLOB_PATTERN, MAX_GLOB_LENGTH, Attempts, Selection
from ledger.areas.health.service import HealthService
from ledger.areas.runs.http import RunSelectionQuery
from ledger.gym.health.catalogue import ALL_CHECKS
from ledger.gym.ids import TASK_ID_PATTERN
from ledger.log.errors import NotFound

router = APIRouter(prefix="/v1", tags=["health"])

Ignore = Annotated[
    list[str] | None,
    Query(
        max_length=len(ALL_CHECKS),
        description="Check ids to skip (Gym's ignored checks); repeat or comma-separate",
        # Documented only (one id per value): an unknown id is a 400 naming it.
        json_schema_extra={"items": {"type": "string", "enum": list(ALL_CHECKS)}},
    ),
]


def _selection(
    ids: Annotated[
        str | None,
        Query(
            max_length=MAX_GLOB_LENGTH,
            description="rollout id glob (* and ?)",
            # Documented only: a glob with other characters is a 400 naming them.
            json_schema_extra={"pattern": GLOB_PATTERN},
        ),
    ] = None,
    since: Annotated[
        datetime | None, Query(description="last event at or after (ISO 8601)")
    ] = None,
    until: Annotated[datetime | None, Query(description="last event before (ISO 8601)")] = None,
    task_id: Annotated[str | None, Query(max_length=1000, pattern=TASK_ID_PATTERN)] = None,
    attempts: Annotated[
        Attempts, Query(description="'latest': one attempt per (task, rollout); 'all'")
    ] = "latest",
    run: RunSelectionQuery = None,
) -> Selection:
    return Selection(ids=ids, since=since, until=until, task_id=task_id, attempts=attempts, run=run)


SelectionDep = Annotated[Selection, Depends(_selection)]


def _service(ledger: LedgerDep) -> HealthService:
    return HealthService(ledger.store.read_sync)


ServiceDep = Annotated[HealthService, Depends(_service)]


def _evidence(ledger: LedgerDep) -> EvidenceService:
    return EvidenceService(ledger.store.read_sync, ledger.settings.capture_grace_s)


EvidenceDep = Annotated[EvidenceService, Depends(_evidence)]
# The ledger's own check beside Gym's (docs/gym.md, "What the ledger reconciles").
EVIDENCE_CHECK = "model_call_evidence"


def _split(values: list[str] | None) -> list[str]:
    return [part for value in values or [] for part in value.split(",")]


@router.get("/rollouts/{rollout_id}/health", responses=error_responses(404, 503))
async def rollout_health(
    service: ServiceDep,
    evidence: EvidenceDep,
    _auth: ReadAuth,
    rollout_id: FreshRolloutIdDep,
    ignore: Ignore = None,
) -> dict[str, Any]:
    """The rollout's verdict, findings and unobserved checks, from its current record (the
    run-level checks, duplicate identity and the task checks, are in ``/v1/health``), and the
    ledger's own check of its calls' evidence (``ledger_checks``). A rollout with call
    evidence and no record yet has Gym's part null."""
    reconciled = await evidence.rollout(rollout_id)
    try:
        answer = await service.rollout(rollout_id, _split(ignore))
    except NotFound:
        if reconciled is None or not reconciled["calls"]:
            raise
        answer = {
            "rollout_id": rollout_id,
            "last_seq": None,
            "verdict": None,
            "findings": [],
            "unobserved": [],
            "ignored_checks": sorted(set(_split(ignore))),
        }
    if reconciled is not None:
        answer["ledger_checks"] = {
            EVIDENCE_CHECK: {
                "grace_s": reconciled["grace_s"],
                "coverage": reconciled["coverage"],
                "findings": reconciled["findings"],
            }
        }
    return answer


@router.get("/health", responses=error_responses(409, 503))
async def run_health(
    service: ServiceDep,
    evidence: EvidenceDep,
    _auth: ReadAuth,
    selection: SelectionDep,
    _views: ProjectedViewsDep,
    ignore: Ignore = None,
) -> dict[str, Any]:
    """Gym's ``quality_summary.json`` for the selected rollouts, with the selection's counts
    (matched, superseded attempts, counted), and the ledger's own check beside it: the
    selection's call coverage (admitted, captured, missing, pending), in total and per run."""
    report = await service.report(selection, _split(ignore))
    return {
        "selection": {**selection.describe(), **report.counts.public()},
        "quality_summary": report.summary,
        "ledger_checks": {EVIDENCE_CHECK: await evidence.coverage(selection)},
    }


@router.get("/health/quality-summary", responses=error_responses(409, 503))
async def quality_summary_file(
    service: ServiceDep,
    _auth: ReadAuth,
    selection: SelectionDep,
    _views: ProjectedViewsDep,
    ignore: Ignore = None,
) -> Response:
    """``quality_summary.json`` byte for byte as Gym 0.7.0 writes it."""
    report = await service.report(selection, _split(ignore))
    return Response(content=report.summary_bytes(), media_type="application/json")


@router.get("/health/rollout-verdicts", responses=error_responses(409, 503))
async def rollout_verdicts_file(
    service: ServiceDep,
    _auth: ReadAuth,
    selection: SelectionDep,
    _views: ProjectedViewsDep,
    ignore: Ignore = None,
) -> Response:
    """``rollout_verdicts.jsonl`` byte for byte as Gym 0.7.0 writes it."""
    report = await service.report(selection, _split(ignore))
    return Response(content=b"".join(report.verdict_lines()), media_type="application/x-ndjson")


@router.get("/perf-summary", responses=error_responses(409, 503))
async def run_perf_summary(
    service: ServiceDep, _auth: ReadAuth, selection: SelectionDep, _views: ProjectedViewsDep
) -> dict[str, Any]:
    """Gym's ``perf_summary`` block over the selected rollouts' ``ng_perf`` (null when no
    rollout has one)."""
    return await service.perf(selection)
