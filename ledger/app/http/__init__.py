"""The HTTP API: Gym's control routes and the ledger's own /v1 routes."""
