"""One proxied call: read the request (bounded), forward it upstream, pass the answer through
as it arrives, and hand what was seen to the recorder once the client has it all.

Pure ASGI: the body goes to the client chunk by chunk exactly as the upstream sent it (no
re-encoding, no buffering beyond one chunk), while a bounded copy is kept for the capture. A
task watches for the client going away, so a disconnect mid-stream closes the upstream call at
once and still leaves a capture of what was seen.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from starlette.types import Receive, Scope, Send

from ledger.areas.proxy.errors import is_anthropic_style, send_error
from ledger.areas.proxy.headers import (
    RawHeaders,
    client_presents,
    client_response_headers,
    single_value,
    upstream_request_headers,
)
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.areas.proxy.recorder import CaptureRecorder
from ledger.areas.proxy.targets import Target, TargetNotFound, parse_target
from ledger.areas.proxy.upstream_client import (
    UpstreamClient,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
)
from ledger.areas.proxy.upstreams import Upstream
from ledger.gym.dialects import MODEL_CALL_ID_HEADER, SESSION_ID_HEADER
from ledger.gym.error_categories import exception_category
from ledger.gym.ids import MAX_ROLLOUT_ID_LENGTH, ROLLOUT_ID_PATTERN
from ledger.gym.observed_calls import ObservedCall
from ledger.gym.sse import is_event_stream

log = logging.getLogger(__name__)


class _ClientGone(Exception):
    """The client disconnected before its request body arrived whole."""


class _BodyTimedOut(Exception):
    """The request body did not arrive whole within ``ProxyLimits.body_timeout_s``."""


@dataclass(frozen=True)
class ProxyLimits:
    max_request_bytes: int
    max_response_bytes: int
    # From the first read of the request body to its end (a trickling client is cut off).
    body_timeout_s: float


class _CaptureBuffer:
    """A copy of the response body up to ``limit`` bytes; past it, nothing is kept."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflowed = False

    def add(self, chunk: bytes) -> None:
        if self.overflowed:
            return
        self._size += len(chunk)
        if self._size > self._limit:
            self.overflowed = True
            self._chunks.clear()
            return
        self._chunks.append(chunk)

    def value(self) -> bytes | None:
        return None if self.overflowed else b"".join(self._chunks)


@dataclass
class _Outcome:
    """How the answer ended: ``failure`` is a Gym category when it did not end normally;
    ``aborted`` when the client's response has to be cut off to say so."""

    failure: str | None = None
    aborted: bool = False
    first_byte_at: float | None = None


async def _read_body(receive: Receive, limit: int, timeout_s: float) -> bytes | None:
    """The whole request body, or None once it passes ``limit`` (nothing more is kept)."""
    chunks: list[bytes] = []
    size = 0
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                message = await receive()
        except TimeoutError:
            raise _BodyTimedOut from None
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class Forwarder:
    def __init__(
        self,
        *,
        client: UpstreamClient,
        upstreams: Mapping[str, Upstream],
        recorder: CaptureRecorder,
        metrics: ProxyMetrics,
        limits: ProxyLimits,
        ingest_token: str | None,
    ) -> None:
        self._client = client
        self._upstreams = dict(upstreams)
        self._default = next(iter(self._upstreams.values()), None)
        self._recorder = recorder
        self._metrics = metrics
        self._limits = limits
        self._ingest_token = ingest_token

    def _upstream(self, name: str | None) -> Upstream | str:
        """The upstream, or the message of the 404 that says why there is none."""
        if self._default is None:
            return "the capture proxy has no upstream (ledger serve --upstream NAME=URL)"
        if name is None:
            return self._default
        found = self._upstreams.get(name)
        if found is None:
            known = ", ".join(self._upstreams)
            return f"unknown upstream {name[:64]!r}; configured: {known}"
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
        headers: RawHeaders = list(scope["headers"])
        try:
            target = parse_target(raw_path)
        except TargetNotFound as exc:
            await self._refuse(send, 404, "no_route", str(exc), anthropic=False)
            return
        anthropic = is_anthropic_style(target.dialect, target.raw_path)
        if target.invalid_rollout_id is not None:
            # repr escapes CR/LF and any control character: the id is named, never replayed.
            shown = target.invalid_rollout_id[:MAX_ROLLOUT_ID_LENGTH]
            message = (
                f"Invalid rollout id: {shown!r} (Gym's charset"
                f" {ROLLOUT_ID_PATTERN.pattern.strip('^$')}, at most {MAX_ROLLOUT_ID_LENGTH}"
                " characters)"
            )
            await self._refuse(send, 400, "invalid_rollout_id", message, anthropic=anthropic)
            return
        if self._ingest_token is not None and not client_presents(headers, self._ingest_token):
            message = "missing or invalid ingest token (send it as the client's API key)"
            await self._refuse(send, 401, "unauthorized", message, anthropic=anthropic)
            return
        upstream = self._upstream(target.upstream)
        if isinstance(upstream, str):
            await self._refuse(send, 404, "unknown_upstream", upstream, anthropic=anthropic)
            return
        if _declared_length(headers) > self._limits.max_request_bytes:
            await self._too_large(send, anthropic)
            return
        try:
            body = await _read_body(
                receive, self._limits.max_request_bytes, self._limits.body_timeout_s
            )
        except _ClientGone:
            return
        except _BodyTimedOut:
            message = f"request body not received within {self._limits.body_timeout_s:g} s"
            await self._refuse(
                send,
                408,
                "body_timeout",
                message,
                anthropic=anthropic,
                extra_headers=[(b"connection", b"close")],
            )
            return
        if body is None:
            await self._too_large(send, anthropic)
            return
        await self._forward(scope, receive, send, target, upstream, headers, body, anthropic)

    async def _too_large(self, send: Send, anthropic: bool) -> None:
        limit = self._limits.max_request_bytes
        message = f"request body exceeds the proxy limit of {limit} bytes"
        await self._refuse(send, 413, "request_too_large", message, anthropic=anthropic)

    async def _refuse(
        self,
        send: Send,
        status: int,
        reason: str,
        message: str,
        *,
        anthropic: bool,
        extra_headers: RawHeaders | None = None,
    ) -> None:
        """Answer the client's mistake ourselves, and count it (never as an upstream's)."""
        self._metrics.refused_calls.labels(reason=reason).inc()
        await send_error(
            send, status, message, anthropic_style=anthropic, extra_headers=extra_headers
        )

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        target: Target,
        upstream: Upstream,
        headers: RawHeaders,
        body: bytes,
        anthropic: bool,
    ) -> None:
        call = _Call.start(target, upstream, headers, body) if target.dialect else None
        captured = call is not None and call.rollout_id is not None
        self._metrics.calls.labels(
            upstream=upstream.name, dialect=target.dialect or "other", captured=str(captured)
        ).inc()
        id_header = call.id_header() if call is not None and captured else []
        forwarded_headers = upstream_request_headers(
            headers,
            upstream,
            anthropic_style=anthropic,
            strip_credentials=self._ingest_token is not None,
        )
        started = time.perf_counter()
        try:
            response = await self._client.send(
                scope["method"].encode("ascii"),
                upstream.origin,
                upstream.target(target.raw_path, scope.get("query_string", b"")),
                forwarded_headers,
                body,
            )
        except Exception as exc:
            category, status, reason = _upstream_failure(exc)
            self._metrics.upstream_failures.labels(category=category).inc()
            log.warning("upstream %s: %s: %s", upstream.name, type(exc).__name__, str(exc)[:200])
            message = f"upstream {upstream.name!r} did not answer: {type(exc).__name__}"
            await send_error(
                send, status, message, anthropic_style=anthropic, extra_headers=id_header
            )
            if call is not None and captured:
                observed = call.observed(
                    started, None, None, streaming=False, outcome=_Outcome(failure=category)
                )
                self._submit(call, replace(observed, local_response_reason=reason))
            return
        buffer = _CaptureBuffer(self._limits.max_response_bytes)
        content_type = response.header(b"content-type")
        streaming = is_event_stream(
            None if content_type is None else content_type.decode("latin-1")
        )
        # The capture is taken however the relay ends: normally, cut off, the client gone, or
        # this request cancelled (server shutdown): what was seen is what is captured.
        outcome = _Outcome()
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": client_response_headers(response.headers) + id_header,
                }
            )
            await self._relay(response, receive, send, buffer, streaming, outcome)
        except OSError:  # the client went away before the answer could start
            outcome.failure, outcome.aborted = "cancelled", True
        except BaseException:  # this request is cancelled (server shutdown)
            outcome.failure, outcome.aborted = "cancelled", True
            raise
        finally:
            await response.aclose()
            if call is not None and captured:
                self._submit(
                    call,
                    call.observed(
                        started,
                        response.status_code,
                        buffer.value(),
                        streaming=streaming,
                        outcome=outcome,
                        response_over_limit=buffer.overflowed,
                    ),
                )
        # An aborted answer returns without its final body message: the server then cuts the
        # connection, and the client sees the answer was cut short, as the upstream's was.

    def _submit(self, call: _Call, observed: ObservedCall) -> None:
        assert call.rollout_id is not None
        self._recorder.submit(call.rollout_id, observed)

    async def _relay(
        self,
        response: UpstreamResponse,
        receive: Receive,
        send: Send,
        buffer: _CaptureBuffer,
        streaming: bool,
        outcome: _Outcome,
    ) -> None:
        """Relay the answer, recording in ``outcome`` how it ended."""
        if not streaming:
            # A plain body mostly arrives with its headers: it is relayed in this task, with
            # no watcher task (two tasks per call cost more than the relay); a client gone
            # shows as its send failing, or, if the body was already on its way, not at all.
            try:
                await self._pump(response, send, buffer, outcome)
            except Exception as error:
                _ended_by(error, streaming, outcome)
            return
        pump = asyncio.create_task(self._pump(response, send, buffer, outcome))
        watch = asyncio.create_task(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this request itself is cancelled (server shutdown)
            watch.cancel()
            pump.cancel()
            raise
        watch.cancel()
        if not pump.done():  # the client went away first
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            outcome.failure = "cancelled"
            outcome.aborted = True
            return
        failed = pump.exception()
        if failed is not None:
            _ended_by(failed, streaming, outcome)

    async def _pump(
        self, response: UpstreamResponse, send: Send, buffer: _CaptureBuffer, outcome: _Outcome
    ) -> None:
        declared = response.header(b"content-length")
        remaining = int(declared) if declared is not None and declared.isdigit() else None
        finished = False
        async for chunk in response.aiter_raw():
            if not chunk:
                continue
            if outcome.first_byte_at is None:
                outcome.first_byte_at = time.perf_counter()
            buffer.add(chunk)
            if remaining is not None:
                remaining -= len(chunk)
            # The last chunk of a body of known length ends the response (one send saved).
            finished = remaining is not None and remaining <= 0
            await send({"type": "http.response.body", "body": chunk, "more_body": not finished})
        if not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


@dataclass(frozen=True)
class _Call:
    """What a captured call knows before it is forwarded."""

    target: Target
    upstream: Upstream
    request_body: bytes
    model_call_id: str
    started_at: float
    client_session_id: str | None

    @classmethod
    def start(cls, target: Target, upstream: Upstream, headers: RawHeaders, body: bytes) -> _Call:
        return cls(
            target=target,
            upstream=upstream,
            request_body=body,
            model_call_id=uuid.uuid4().hex,
            started_at=time.time(),
            client_session_id=single_value(headers, SESSION_ID_HEADER.encode()),
        )

    @property
    def rollout_id(self) -> str | None:
        return self.target.rollout_id

    def id_header(self) -> RawHeaders:
        return [(MODEL_CALL_ID_HEADER.encode(), self.model_call_id.encode())]

    def observed(
        self,
        started: float,
        status_code: int | None,
        response_body: bytes | None,
        *,
        streaming: bool,
        outcome: _Outcome,
        response_over_limit: bool = False,
    ) -> ObservedCall:
        """The observed call, ``started`` (perf_counter) to now."""
        elapsed = time.perf_counter() - started
        first = outcome.first_byte_at
        assert self.target.dialect is not None
        return ObservedCall(
            model_call_id=self.model_call_id,
            dialect=self.target.dialect,
            model_server=self.upstream.name,
            started_at=self.started_at,
            completed_at=self.started_at + elapsed,
            latency_ms=elapsed * 1000,
            latency_ttft_ms=None if first is None else (first - started) * 1000,
            status_code=status_code,
            request_body=self.request_body,
            response_body=response_body,
            streaming=streaming,
            failure_category=outcome.failure,
            client_session_id=self.client_session_id,
            response_source="upstream" if status_code is not None else "local",
            response_over_limit=response_over_limit,
        )


def _ended_by(error: BaseException, streaming: bool, outcome: _Outcome) -> None:
    """Record in ``outcome`` how a relay that raised ``error`` ended."""
    outcome.aborted = True
    if isinstance(error, OSError):  # the client went away while we were sending
        outcome.failure = "cancelled"
    elif isinstance(error, UpstreamTimeout):
        outcome.failure = "timeout"
    elif isinstance(error, UpstreamError):
        # A stream cut off by the peer is a stream without its terminal event (Gym's rules
        # decide: stream_truncated); a plain body cut off is a connection failure.
        outcome.failure = None if streaming else "connection"
    else:
        outcome.failure = exception_category(error)
        log.error("relaying an upstream answer failed: %s: %s", type(error).__name__, error)


def _upstream_failure(error: Exception) -> tuple[str, int, str]:
    """Gym's category of a call the upstream never answered, our status, and the reason."""
    if isinstance(error, UpstreamTimeout):
        return "timeout", 504, "upstream_timeout"
    if isinstance(error, UpstreamError):
        return "connection", 502, "upstream_unreachable"
    return exception_category(error), 502, "upstream_request_failed"


def _declared_length(headers: RawHeaders) -> int:
    for name, value in headers:
        if name.lower() == b"content-length" and value.isdigit():
            return int(value)
    return 0
