"""Routes of the lineage area."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
