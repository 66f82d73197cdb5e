"""OpenTelemetry export: the ledger's rollouts as OTLP traces (GenAI and OpenInference
attributes), sent once (``ledger export --otlp``) or by a follower in ``ledger serve``."""
