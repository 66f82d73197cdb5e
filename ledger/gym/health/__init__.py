"""Gym 0.7.0's rollout health checks (``gym eval health-check``), as pure rules.

Input: enriched rollout records (what ``ledger export`` writes and Gym's ``run_health_checks``
reads). Output: per-rollout digests (verdict, findings, unobserved checks), the quality summary
and the per-rollout verdict lines, serialised byte for byte as Gym writes them. No I/O.
"""
