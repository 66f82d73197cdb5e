"""Gym's shapes and pure rules (no I/O): captures, lineage, observations, trajectory and perf."""
