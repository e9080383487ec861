"""The durable spool between receiving and processing: an append-only log of OTLP requests
(raw bytes, tenant, receive time) with group-commit fsync (:mod:`collector.spool.log`), and the
processor that normalises and writes from it, recording its offset only after the store commit
(:mod:`collector.spool.processor`) — in the collector's process (thread mode) or in its own
(:mod:`collector.spool.worker`, reading through :mod:`collector.spool.reader`, started and
restarted by :mod:`collector.spool.supervisor`, reporting through :mod:`collector.spool.status`).
"""
