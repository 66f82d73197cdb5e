"""Routes of the observations area."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
