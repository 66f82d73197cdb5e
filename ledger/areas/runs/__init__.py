"""Run labels: which run a rollout belongs to (issue 12 §3)."""
