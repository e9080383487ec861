"""The collector's own Prometheus telemetry: ingest health metrics and the LLM KPI series observed
on committed call records.
"""
