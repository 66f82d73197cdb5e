"""Agent observations, rollout results and the enriched record (ng_trajectory, ng_perf)."""
