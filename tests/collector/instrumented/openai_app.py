"""Run in its own venv: the real ``openai`` client instrumented by a real instrumentation,
exporting traces and logs over OTLP/HTTP.

Usage: python openai_app.py <collector URL> <fake OpenAI base URL>
[openai-v2|openllmetry|openinference|openlit] [model, default gpt-4o-mini]
One plain and one streaming chat completion. openai-v2: content captured as log records (the
instrumentation's default event mode with content capture on); openllmetry
(``opentelemetry-instrumentation-openai``): content as span attributes, one
``gen_ai.content.completion.chunk`` span event per streamed chunk; openinference
(``openinference-instrumentation-openai``): ``llm.*`` attributes, one "First Token Stream Event"
on a streaming span; openlit: semconv attributes with ``gen_ai.server.time_to_first_token`` and
``gen_ai.usage.cost``, plus operation-details log records.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

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


def main(collector: str, openai_url: str, library: str, model: str) -> None:
    resource = Resource.create({"service.name": "openai-v2-app"})
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{collector}/v1/traces")))
    trace.set_tracer_provider(tp)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(f"{collector}/v1/logs")))
    _logs.set_logger_provider(lp)
    if library == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif library == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif library == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tp)
    elif library == "openlit":
        import openlit

        # an empty price list instead of its download from GitHub: every model is one it cannot
        # price (it then reports gen_ai.usage.cost = 0)
        prices = Path(tempfile.mkdtemp()) / "pricing.json"
        prices.write_text(json.dumps({"chat": {}}))
        # uses the SDK providers set above (it builds its own only when none is set)
        openlit.init(
            application_name="openai-app",
            capture_message_content=True,
            disable_metrics=True,
            pricing_json=str(prices),
        )
    else:
        raise SystemExit(f"unknown library {library!r}")
    client = OpenAI(base_url=openai_url, api_key="test")
    client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
    )
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count to three."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    tp.shutdown()
    lp.shutdown()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0], args[1], args[2] if len(args) > 2 else "openai-v2", *(args[3:4] or ["gpt-4o-mini"])
    )
