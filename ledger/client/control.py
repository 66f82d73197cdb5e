"""Client for the control routes."""

from __future__ import annotations
