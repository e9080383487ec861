"""Ingest: OTLP decode, dialect detection and normalisation into one call record (TTFT, ITL,
queue/prefill/decode, tokens, cost), captured text and redaction, feedback, and the batch writer.
"""
