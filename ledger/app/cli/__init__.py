"""The ``ledger`` command: a thin layer over the library (sqlite-utils style)."""
