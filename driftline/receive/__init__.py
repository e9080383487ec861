"""The receive room: every OTLP receiver (HTTP and gRPC; traces and logs) and the one sink they
hand requests to.

A receiver authenticates the caller, checks type and size, validates, and hands the request to
the :class:`~driftline.receive.sink.Sink` chosen once at start-up (:func:`~driftline.receive.
sink.make_sink`): the spool (answer once fsynced) or the store (answer once committed). It then
turns the outcome, or the error, into its protocol's answer.

Layering: the room sits in ``driftline`` (the composition root) because it is where the web
frameworks (FastAPI, grpcio) meet the collector's spool and writer: it imports
``collector.spool`` and ``collector.ingest``, and only ``driftline.app`` imports it. Nothing in
``collector`` imports it, so the collector's layers stay one-way (``spool`` above ``ingest``).
"""
