"""The rollout viewer: read-only HTML pages over the projections (issue 13)."""
