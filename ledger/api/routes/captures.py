"""Routes of the captures area."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
