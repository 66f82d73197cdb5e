"""Prometheus metrics, one registry per ledger instance (no process-global collectors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LedgerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.events_appended = Counter(
            "ledger_events_appended", "Events appended to the log", registry=self.registry
        )
        self.batch_size = Histogram(
            "ledger_writer_batch_size",
            "Commands applied per writer transaction (group commit)",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "ledger_writer_commit_seconds",
            "Time to apply and commit one writer batch",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "ledger_writer_queue_depth", "Commands waiting for the writer", registry=self.registry
        )
        self.failed_batches = Counter(
            "ledger_writer_failed_batches",
            "Writer batches whose commit failed",
            registry=self.registry,
        )
        self.http_errors = Counter(
            "ledger_http_errors",
            "Requests answered with an error status",
            ["status"],
            registry=self.registry,
        )
        self.fences = Counter("ledger_fences", "Rollouts fenced (retired)", registry=self.registry)
        self.mirror_lag_events = Gauge(
            "ledger_mirror_lag_events",
            "Events not yet written to the JSONL mirror",
            registry=self.registry,
        )
        self.mirror_lag_seconds = Gauge(
            "ledger_mirror_lag_seconds",
            "Age of the oldest event not yet written to the JSONL mirror",
            registry=self.registry,
        )
        self.views_projected_seq = Gauge(
            "ledger_views_projected_seq",
            "Seq every view (a projection that follows the log) has applied",
            registry=self.registry,
        )
        self.views_behind_events = Gauge(
            "ledger_views_behind_events",
            "Events of the log the views have yet to apply",
            registry=self.registry,
        )
        self.views_failing_seq = Gauge(
            "ledger_views_failing_seq",
            "Seq of the event a view cannot apply (0 when none): the views stay before it",
            registry=self.registry,
        )
        self.checkpoint_seq = Gauge(
            "ledger_checkpoint_seq",
            "Seq of the last signed checkpoint this process published",
            registry=self.registry,
        )
        self.checkpoint_failures = Counter(
            "ledger_checkpoint_failures",
            "Checkpoints not written to a witness (or not signed)",
            registry=self.registry,
        )

        # The capture-directory followers (ledger serve --follow-capture-dir), per directory.
        self.follow_files = Gauge(
            "ledger_capture_follow_files",
            "Capture files and markers in a followed directory",
            ["directory"],
            registry=self.registry,
        )
        self.follow_lag_bytes = Gauge(
            "ledger_capture_follow_lag_bytes",
            "Bytes of a followed directory's capture files not yet ingested",
            ["directory"],
            registry=self.registry,
        )
        self.follow_lag_seconds = Gauge(
            "ledger_capture_follow_lag_seconds",
            "Age of the oldest change in a followed directory not yet ingested",
            ["directory"],
            registry=self.registry,
        )
        self.follow_lines = Counter(
            "ledger_capture_follow_lines",
            "Capture lines ingested by a directory follower",
            ["directory"],
            registry=self.registry,
        )

        # The health follower (areas/health/follower.py): each rollout's own verdict (no
        # check ignored, before the run-level checks), from health_findings.
        self.rollouts_by_verdict = Gauge(
            "ledger_rollouts_by_verdict",
            "Rollouts by their health verdict (rows current with their record)",
            ["verdict"],
            registry=self.registry,
        )
        # The evidence area's findings (areas/evidence/findings.py), counted at scrape time.
        self.calls_by_evidence_finding = Gauge(
            "ledger_model_calls_by_evidence_finding",
            "Calls of current rollout generations by evidence finding (pending, missing "
            "capture; capture without a lineage row)",
            ["kind"],
            registry=self.registry,
        )
        self.health_findings_behind = Gauge(
            "ledger_health_findings_behind_rollouts",
            "Rollouts whose health findings are missing or older than their record",
            registry=self.registry,
        )

        # The OTLP export (areas/otel/follower.py; docs/otel.md).
        self.otlp_spans = Counter(
            "ledger_otlp_spans",
            "Spans sent to the OTLP collector, by outcome (sent: taken; refused: its answer "
            "refused them)",
            ["outcome"],
            registry=self.registry,
        )
        self.otlp_requests_retried = Counter(
            "ledger_otlp_requests_retried",
            "Export requests sent again after a failure",
            registry=self.registry,
        )
        self.otlp_requests_failed = Counter(
            "ledger_otlp_requests_failed",
            "Export requests that failed (connection, timeout, or an error status)",
            registry=self.registry,
        )
        self.otlp_export_failures = Counter(
            "ledger_otlp_export_failures",
            "Pages the collector did not take after the retries (sent again later)",
            registry=self.registry,
        )
        self.otlp_lag_rollouts = Gauge(
            "ledger_otlp_lag_rollouts",
            "Rollouts whose record changed after the OTLP export's checkpoint",
            registry=self.registry,
        )
        self.otlp_lag_seconds = Gauge(
            "ledger_otlp_lag_seconds",
            "Age of the oldest record change not yet exported over OTLP",
            registry=self.registry,
        )

    def count_otlp(self, *, sent: int, refused: int, retried: int, failed_requests: int) -> None:
        self.otlp_spans.labels(outcome="sent").inc(sent)
        self.otlp_spans.labels(outcome="refused").inc(refused)
        self.otlp_requests_retried.inc(retried)
        self.otlp_requests_failed.inc(failed_requests)

    def count_otlp_failure(self) -> None:
        self.otlp_export_failures.inc()

    def set_otlp_lag(self, rollouts: int, seconds: float) -> None:
        self.otlp_lag_rollouts.set(rollouts)
        self.otlp_lag_seconds.set(seconds)

    def set_call_evidence(self, by_kind: dict[str, int]) -> None:
        for kind, count in by_kind.items():
            self.calls_by_evidence_finding.labels(kind=kind).set(count)

    def set_health_verdicts(self, by_verdict: dict[str, int], behind: int) -> None:
        for verdict, count in by_verdict.items():
            self.rollouts_by_verdict.labels(verdict=verdict).set(count)
        self.health_findings_behind.set(behind)

    def set_views_progress(self, projected: int, behind: int, failing_seq: int) -> None:
        self.views_projected_seq.set(projected)
        self.views_behind_events.set(behind)
        self.views_failing_seq.set(failing_seq)

    def set_mirror_lag(self, events: int, seconds: float) -> None:
        self.mirror_lag_events.set(events)
        self.mirror_lag_seconds.set(seconds)

    def observe_batch(self, size: int, commit_seconds: float, events: int) -> None:
        self.batch_size.observe(size)
        self.commit_seconds.observe(commit_seconds)
        self.events_appended.inc(events)

    def observe_checkpoint(self, seq: int) -> None:
        self.checkpoint_seq.set(seq)

    def count_checkpoint_failure(self) -> None:
        self.checkpoint_failures.inc()

    def set_queue_depth(self, depth: int) -> None:
        self.queue_depth.set(depth)

    def count_failed_batch(self) -> None:
        self.failed_batches.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
