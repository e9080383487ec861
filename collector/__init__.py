"""The ground layer: OTLP receivers, decode and normalisation into the LLM-call record, redaction
and capture policy, feedback, the store (SQLite / PostgreSQL), engine metrics, cost, Prometheus
telemetry and the job scheduler. Imports nothing from drift, judges, alerts, serving, dashboard or
driftline.
"""
