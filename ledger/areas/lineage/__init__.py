"""Lineage: the token-free capture ledger, manifests, retirement fences, retire/delete."""
