"""Importing existing Gym directories (capture files, lineage ledgers) into the ledger."""
