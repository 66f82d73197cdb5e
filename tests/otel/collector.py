"""A collector on loopback for the follower's tests: it takes OTLP/HTTP trace exports (decoded
with OpenTelemetry's protobuf messages), keeps each request's headers and span ids, and
answers a status of the test's choosing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Collector:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.span_ids: list[bytes] = []  # every span taken, in order (repeats kept)
        self.headers: list[dict[str, str]] = []
        self.answer = 200  # the status of the next requests
        self.refused_requests = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def taken(self) -> set[bytes]:
        with self.lock:
            return set(self.span_ids)


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with collector.lock:
                status = collector.answer
                collector.headers.append({k.lower(): v for k, v in self.headers.items()})
                if status == 200:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    collector.span_ids += [
                        span.span_id
                        for resource in request.resource_spans
                        for scope in resource.scope_spans
                        for span in scope.spans
                    ]
                else:
                    collector.refused_requests += 1
            answer = ExportTraceServiceResponse().SerializeToString() if status == 200 else b"no"
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def running_collector() -> Iterator[Collector]:
    collector = Collector()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(collector))
    collector.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
