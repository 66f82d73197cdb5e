"""The Gym leg: tests against the released nemo-gym 0.7.0 (scripts/test-gym)."""
