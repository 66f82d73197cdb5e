"""Gym's shapes and pure rules (no I/O): one module per area."""
