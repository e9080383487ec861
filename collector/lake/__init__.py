"""The lake: closed hours of calls sealed to hive-partitioned Parquet, and the one query layer.

* :mod:`collector.lake.layout`: paths, the sealed schema (version 1), ``DRIFTLINE_LAKE_URL``;
* :mod:`collector.lake.manifest`: which hours are sealed (atomic JSON per tenant);
* :mod:`collector.lake.seal`: the sealing job's work, re-seal of late hours, lake retention;
* :mod:`collector.lake.summary`: mergeable per-hour summaries (log-bin histograms, 1 % error);
* :mod:`collector.lake.query`: sealed Parquet + the store's hot tail, read once (DuckDB);
* :mod:`collector.lake.stats`: ``/api/v1/stats`` from summaries or raw rows;
* :mod:`collector.lake.jobs`: the scheduled seal job;
* :mod:`collector.lake.spark`: the same reads on a user's Spark session (optional ``pyspark``).

The layout is documented for other engines in ``docs/lake.md``.
"""
