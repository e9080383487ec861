"""REST routers of the collector app (``/api/v1/...``, OTLP ``/v1/traces``, ``/metrics``,
``/healthz``); each one is a thin layer over store, judges, drift and alerts functions.
"""
