"""Client for the captures routes."""

from __future__ import annotations
