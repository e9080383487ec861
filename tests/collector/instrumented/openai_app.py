"""Run in its own venv: the real ``openai`` client instrumented by the real
``opentelemetry-instrumentation-openai-v2``, exporting traces and logs over OTLP/HTTP.

Usage: python openai_v2_app.py <collector URL> <fake OpenAI base URL> [openai-v2|openllmetry]
One plain and one streaming chat completion. openai-v2: content captured as log records (the
instrumentation's default event mode with content capture on); openllmetry
(``opentelemetry-instrumentation-openai``): content as span attributes, one
``gen_ai.content.completion.chunk`` span event per streamed chunk.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

from openai import OpenAI
from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def main(collector: str, openai_url: str, library: str) -> None:
    resource = Resource.create({"service.name": "openai-v2-app"})
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{collector}/v1/traces")))
    trace.set_tracer_provider(tp)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(f"{collector}/v1/logs")))
    _logs.set_logger_provider(lp)
    if library == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument()
    client = OpenAI(base_url=openai_url, api_key="test")
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
    )
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Count to three."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    tp.shutdown()
    lp.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "openai-v2")
