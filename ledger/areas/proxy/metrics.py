"""The proxy's Prometheus series, on the running ledger's registry (served at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "ledger_proxy_calls",
            "Calls the capture proxy forwarded (captured: whether a capture was taken)",
            ["upstream", "dialect", "captured"],
            registry=registry,
        )
        self.refused_calls = Counter(
            "ledger_proxy_refused_calls",
            "Calls the proxy answered itself with a 4xx, never forwarded: the client's request"
            " was wrong (reason: invalid_rollout_id, no_route, unknown_upstream, unauthorized,"
            " request_too_large, body_timeout)",
            ["reason"],
            registry=registry,
        )
        self.upstream_failures = Counter(
            "ledger_proxy_upstream_failures",
            "Calls the upstream did not answer (the proxy answered 502/504)",
            ["category"],
            registry=registry,
        )
        self.captures = Counter(
            "ledger_proxy_captures", "Captures appended by the proxy", registry=registry
        )
        self.capture_failures = Counter(
            "ledger_proxy_capture_failures",
            "Captures lost or incomplete (their rollout is marked incomplete)",
            ["reason"],
            registry=registry,
        )
        self.incomplete_mark_failures = Counter(
            "ledger_proxy_incomplete_mark_failures",
            "Rollouts that could not even be marked incomplete after a capture failure",
            registry=registry,
        )
        self.captures_pending = Gauge(
            "ledger_proxy_captures_pending",
            "Captures of answered calls not yet durable",
            registry=registry,
        )
        self.capture_process_starts = Counter(
            "ledger_proxy_capture_process_starts",
            "Capture processes started (the first, then one after each that ended)",
            registry=registry,
        )
