"""Fixtures shared by the telemetry tests: an SDK tracer provider with an in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend duraloop ships with)."""
    return "asyncio"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """The finished spans of `provider`, in the order they ended."""
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """An SDK tracer provider exporting every span at once to `exporter`."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()
