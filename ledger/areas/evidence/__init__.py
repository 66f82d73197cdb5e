"""The evidence area: every admitted model call against its lineage row, intent and capture."""
