"""Gym's shapes and pure rules, no I/O (model-call records, capture lines, attachments)."""
