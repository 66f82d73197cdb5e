"""POSTing export requests to an OTLP/HTTP collector, with bounded retries and backoff.

As the OTLP specification says, 429, 502, 503 and 504 (and a connection that fails) are
retried here, honouring ``Retry-After``; a 200 may still refuse some spans (partial success),
which are counted, not sent again. A request the collector refuses as such (400, 413, ... any
4xx but those below) is counted as refused too: sending it again would be refused again. A
status that says the collector is not ready to take anything (401, 403 and 404: its auth or
its URL; 408; any other 5xx) ends the send with ExportFailed at once: the follower waits and
sends the page again, nothing dropped, while the one-shot export stops and says why.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import httpx

from ledger.areas.otel.spans import Span
from ledger.areas.otel.wire import CONTENT_TYPE, encode_request, rejected_spans

# The collector's headers (its auth), read from the environment when the exporter starts and
# never stored: OpenTelemetry's own form, ``key=value,key2=value2`` (values URL-encoded).
HEADERS_ENV = "LEDGER_OTLP_HEADERS"
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
# 4xx that are about the collector or its configuration, not about the spans sent.
NOT_READY_STATUS = frozenset({401, 403, 404, 408})
MAX_RETRY_AFTER_S = 60.0


class ExportFailed(Exception):
    """The collector did not take a batch (after the retries, or refused for good)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def traces_url(endpoint: str) -> str:
    """The URL the requests go to: an endpoint with no path gets OTLP's ``/v1/traces``."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"an OTLP endpoint is an http(s) URL; got {endpoint!r}")
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def parse_headers(text: str | None) -> dict[str, str]:
    """``key=value,...`` as OTEL_EXPORTER_OTLP_HEADERS spells it; a malformed pair is an
    error that names the position, never the value (it may be a secret)."""
    headers: dict[str, str] = {}
    if not text:
        return headers
    for position, pair in enumerate(text.split(","), start=1):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{HEADERS_ENV}: pair {position} is not key=value")
        headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def headers_from_environment() -> dict[str, str]:
    return parse_headers(os.environ.get(HEADERS_ENV))


@dataclass
class SendTally:
    """What a sender did: spans accepted, refused by the collector, requests retried."""

    sent: int = 0
    refused: int = 0
    retried: int = 0
    failed_requests: int = 0
    refusals: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    first_backoff_s: float = 0.5
    max_backoff_s: float = 10.0

    def backoff(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.first_backoff_s * 2.0**attempt)


class OtlpSender:
    """One collector. ``send`` returns when the batch is taken (some spans may be refused:
    see the tally) or raises ExportFailed when the retries are spent."""

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        tally: SendTally | None = None,
    ) -> None:
        self.url = traces_url(endpoint)
        self._headers = {**(headers or {}), "Content-Type": CONTENT_TYPE}
        self._timeout = timeout_s
        self.retry = retry or RetryPolicy()
        self.tally = tally or SendTally()
        self._client: httpx.AsyncClient | None = None
        # Called after every request (its tally updated): the follower's metrics.
        self.on_request: Callable[[], None] = lambda: None

    async def __aenter__(self) -> OtlpSender:
        self._client = httpx.AsyncClient(timeout=self._timeout, trust_env=False)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send(self, spans: Sequence[Span]) -> None:
        if not spans:
            return
        assert self._client is not None, "use the sender as an async context manager"
        body = encode_request(spans)
        last = ""
        for attempt in range(self.retry.attempts):
            if attempt:
                self.tally.retried += 1
            try:
                response = await self._client.post(self.url, content=body, headers=self._headers)
            except httpx.TransportError as exc:
                self.tally.failed_requests += 1
                self.on_request()
                last = f"{type(exc).__name__}: {exc}"[:300]
                await asyncio.sleep(self.retry.backoff(attempt))
                continue
            try:
                if self._taken(response, spans):
                    return
            finally:
                self.on_request()
            last = f"HTTP {response.status_code}: {response.text[:200]}"
            await asyncio.sleep(self._retry_after(response) or self.retry.backoff(attempt))
        raise ExportFailed(
            f"{self.url} did not take a batch after {self.retry.attempts} attempts: {last}"
        )

    def _taken(self, response: httpx.Response, spans: Sequence[Span]) -> bool:
        """Whether the request is settled (taken, or refused for good); False: retry it.
        Raises ExportFailed when the collector is not ready for any request."""
        status = response.status_code
        if status == 200:
            refused, why = rejected_spans(response.content)
            self.tally.sent += len(spans) - refused
            if refused:
                self.tally.refused += refused
                self.tally.refusals.append(why[:300])
            return True
        self.tally.failed_requests += 1
        if status in RETRYABLE_STATUS:
            return False
        last = f"HTTP {status}: {response.text[:200]}"
        if 400 <= status < 500 and status not in NOT_READY_STATUS:
            self.tally.refused += len(spans)
            self.tally.refusals.append(last[:300])
            return True
        raise ExportFailed(f"{self.url} did not take a batch: {last}")

    @staticmethod
    def _retry_after(response: httpx.Response) -> float | None:
        value = response.headers.get("Retry-After")
        try:
            return None if value is None else float(min(MAX_RETRY_AFTER_S, max(0.0, float(value))))
        except ValueError:
            return None
