"""A local OTLP/HTTP trace endpoint for the `--otel` tests: what the exporter sent, decoded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Collector:
    """What the OTLP endpoint received: each POST's path, headers and decoded request."""

    url: str
    posts: list[tuple[str, dict[str, str], ExportTraceServiceRequest]] = field(default_factory=list)

    def spans(self) -> list[tuple[str, dict[str, Any]]]:
        """Every received span as (name, attributes), with the resource's service.name."""
        found = []
        for _path, _headers, request in self.posts:
            for resource_spans in request.resource_spans:
                service = {
                    kv.key: kv.value.string_value for kv in resource_spans.resource.attributes
                }["service.name"]
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attributes = {kv.key: _value(kv.value) for kv in span.attributes}
                        attributes["service.name"] = service
                        found.append((span.name, attributes))
        return found


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    """A local OTLP/HTTP trace endpoint on a free port."""
    received = Collector(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            headers = {k.lower(): v for k, v in self.headers.items()}
            received.posts.append((self.path, headers, request))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
