"""`--otel`: export the turns' OpenTelemetry GenAI spans over OTLP/HTTP (docs/telemetry.md#cli).

`run`, `chat` and `resume` open `otel_export(otel)` around the turn: with `--otel` it builds
an SDK tracer provider (resource `service.name` from `OTEL_SERVICE_NAME` or
`OTEL_RESOURCE_ATTRIBUTES`, else `duraloop`) with a batch processor and the OTLP/HTTP
exporter, which reads the standard `OTEL_EXPORTER_OTLP_*` variables itself (endpoint,
headers, timeout); `tracing.attach(loop)` instruments a loop; leaving the context detaches
every loop and shuts the provider down, which flushes the spans. Without `--otel` nothing is
imported and `attach` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ..loop import AgentLoop

OtelOption = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export OpenTelemetry GenAI spans of the turns over OTLP/HTTP, configured by the "
        "standard OTEL_EXPORTER_OTLP_* variables (needs `pip install 'duraloop[otel]'`); no "
        "message content unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.",
    ),
]
DEFAULT_SERVICE_NAME = "duraloop"


class Tracing:
    """The loops a command traces, detached when its `otel_export` context ends.

    Args:
        provider: the SDK tracer provider, or None when `--otel` is off.
    """

    def __init__(self, provider: TracerProvider | None) -> None:
        self.provider = provider
        self._detach: list[Callable[[], None]] = []

    def attach(self, loop: AgentLoop) -> None:
        """Trace `loop`'s turns (nothing without `--otel`)."""
        if self.provider is None:
            return
        from ..telemetry import instrument

        self._detach.append(instrument(loop, tracer_provider=self.provider))

    def observer(self) -> Callable[[AgentLoop], Callable[[], None]] | None:
        """Return a per-loop tracer for a worker's drives (None without `--otel`).

        Unlike `attach`, each loop's detach is returned to the caller (the worker calls it when
        the drive ends), so a long-running worker holds nothing per finished drive.
        """
        provider = self.provider
        if provider is None:
            return None

        def observe(loop: AgentLoop) -> Callable[[], None]:
            from ..telemetry import instrument

            return instrument(loop, tracer_provider=provider)

        return observe

    def close(self) -> None:
        """Detach every loop (ending the spans still open), then flush and shut down."""
        for detach in self._detach:
            detach()
        self._detach.clear()
        if self.provider is not None:
            self.provider.shutdown()


def _provider() -> TracerProvider:
    """Build the SDK tracer provider with the OTLP/HTTP exporter behind a batch processor.

    Raises:
        ConfigError: if the SDK or the exporter is not installed.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            f"--otel needs the OpenTelemetry SDK and its OTLP exporter ({exc}): install them "
            "with `pip install 'duraloop[otel]'`, or run without --otel"
        ) from exc
    resource = Resource.create()  # reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@contextmanager
def otel_export(enabled: bool) -> Iterator[Tracing]:
    """Yield the command's `Tracing`; with `enabled` (`--otel`) its spans are exported.

    Args:
        enabled: the `--otel` flag.

    Raises:
        ConfigError: with `--otel`, if the `otel` extra is not installed (before anything
            is written).
    """
    tracing = Tracing(_provider() if enabled else None)
    try:
        yield tracing
    finally:
        tracing.close()
