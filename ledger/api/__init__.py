"""The HTTP API: Gym's control routes and the ledger's own /v1 routes."""

from ledger.api.app import create_app

__all__ = ["create_app"]
