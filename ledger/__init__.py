"""The rollout ledger: an append-only, event-sourced home for RL rollout evidence."""

__version__ = "0.1.0"
