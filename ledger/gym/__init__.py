"""Gym's shapes and rules, pure: no I/O, no database."""
