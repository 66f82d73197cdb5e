"""Tests of the lineage area: rows, manifests, fences, control routes, client, mirror, import."""
