"""A collector that takes OTLP/HTTP trace exports and only counts their spans: the far end of
``scripts/bench otlp``, so the figures are the exporter's, not a backend's.

``python -m benchmarks.otlp_sink --port N``: POST /v1/traces answers 200 with an empty
ExportTraceServiceResponse; GET /count answers the spans received so far.
"""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_EMPTY = ExportTraceServiceResponse().SerializeToString()


class _Counter:
    def __init__(self) -> None:
        self.spans = 0
        self.lock = threading.Lock()


def handler_for(counter: _Counter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = sum(
                len(scope.spans)
                for resource in request.resource_spans
                for scope in resource.scope_spans
            )
            with counter.lock:
                counter.spans += spans
            self._answer(_EMPTY, "application/x-protobuf")

        def do_GET(self) -> None:
            with counter.lock:
                self._answer(str(counter.spans).encode(), "text/plain")

        def _answer(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="otlp_sink")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(_Counter()))
    server.serve_forever()


if __name__ == "__main__":
    main()
