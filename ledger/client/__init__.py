"""httpx clients for the ledger: capture ingest and reads, and Gym's RolloutControlClient."""
