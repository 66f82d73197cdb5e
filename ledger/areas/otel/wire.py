"""Spans on the wire: OTLP's ExportTraceServiceRequest, built with OpenTelemetry's own
protobuf messages (opentelemetry-proto), and its answer's partial success read back."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan

from ledger.areas.otel.spans import Attributes, AttributeValue, Span

SERVICE_NAME = "rollout-ledger"
SCOPE_NAME = "rollout-ledger.otel"
CONTENT_TYPE = "application/x-protobuf"

_KINDS = {"internal": OtlpSpan.SPAN_KIND_INTERNAL, "client": OtlpSpan.SPAN_KIND_CLIENT}
_STATUS = {
    "unset": Status.STATUS_CODE_UNSET,
    "ok": Status.STATUS_CODE_OK,
    "error": Status.STATUS_CODE_ERROR,
}


def _value(value: AttributeValue) -> AnyValue:
    # bool before int: a bool is an int to Python.
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value]))


def _attributes(attributes: Attributes) -> list[KeyValue]:
    return [KeyValue(key=key, value=_value(value)) for key, value in attributes.items()]


def _span(span: Span) -> OtlpSpan:
    return OtlpSpan(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id or b"",
        name=span.name,
        kind=_KINDS[span.kind],
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=_attributes(span.attributes),
        events=[
            OtlpSpan.Event(
                time_unix_nano=event.time_ns,
                name=event.name,
                attributes=_attributes(event.attributes),
            )
            for event in span.events
        ],
        status=Status(code=_STATUS[span.status], message=span.status_message),
    )


def encode_request(spans: Sequence[Span], resource: Attributes | None = None) -> bytes:
    """One export request (protobuf bytes) holding ``spans`` under one resource."""
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(
                    attributes=_attributes({"service.name": SERVICE_NAME, **(resource or {})})
                ),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name=SCOPE_NAME),
                        spans=[_span(span) for span in spans],
                    )
                ],
            )
        ]
    )
    encoded: bytes = request.SerializeToString()
    return encoded


def rejected_spans(body: bytes) -> tuple[int, str]:
    """The answer's partial success: spans the collector refused and why (0 when it says
    nothing, as an empty answer means all were accepted)."""
    if not body:
        return 0, ""
    response = ExportTraceServiceResponse()
    response.ParseFromString(body)
    partial = response.partial_success
    return int(partial.rejected_spans), str(partial.error_message)
