"""The Gym-compatible JSONL mirror: a follower that tails the event log and writes Gym's files."""
