"""The durable spool between receiving and processing: an append-only log of OTLP requests
(raw bytes, tenant, receive time) with group-commit fsync (:mod:`collector.spool.log`), and the
processor that normalises and writes from it, recording its offset only after the store commit
(:mod:`collector.spool.processor`)."""
