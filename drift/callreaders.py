"""Where a drift run reads its calls: the engines behind ``driftline drift run --engine``.

A :class:`CallReader` returns the per-call columns of a tenant's windows (the contract of
:func:`collector.lake.textfeatures.read_windows`: ``llm_calls`` columns and the sealed text
features) and, for the bounded text samples, the texts of named calls only;
:func:`drift.signals.extract` derives every signal from those tables. Both engines read each
call exactly once, sealed hours from the Parquet lake and the unsealed hot tail from the
store, so they give the same tables and the same run:

* ``duckdb`` (:func:`lake_reader`, the default, also the collector's scheduled job): DuckDB
  over the sealed hours' Parquet files; with no lake, the store alone.
* ``spark`` (:func:`spark_reader`): the sealed hours' signal columns extracted by a Spark job on
  a session the caller configures (:func:`spark_session`: ``local[2]`` unless
  ``--spark-master`` / ``DRIFTLINE_DRIFT_SPARK_MASTER`` name another master).

The statistics always run in driftline on the extracted arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from collector.lake import spark as lake_spark
from collector.lake import textfeatures
from collector.lake.layout import Lake
from drift.errors import DriftError

#: ``(database_url, tenant, windows, columns) -> table``: ``columns`` (``llm_calls`` columns
#: and the lake's text features ``refusal`` / ``empty_output``) of the tenant's calls started
#: in each window ``(since_ns, until_ns)`` plus ``int8`` ``win`` (the window's index)
ReadCalls = Callable[[str, str, Sequence[tuple[int, int]], Sequence[str]], pa.Table]
#: ``(database_url, tenant, windows, keys, columns) -> table``: the text ``columns`` of the
#: calls named by ``keys`` (``win``, ``trace_id``, ``span_id``), with those three columns
ReadTexts = Callable[[str, str, Sequence[tuple[int, int]], pa.Table, Sequence[str]], pa.Table]


@dataclass(frozen=True, slots=True)
class CallReader:
    """How a drift run reads its calls: every call's signal columns (:attr:`calls`, the
    contract of :func:`collector.lake.textfeatures.read_windows`) and the texts of the sampled
    calls only (:attr:`texts`, :func:`collector.lake.textfeatures.read_texts`)."""

    calls: ReadCalls
    texts: ReadTexts


ENGINES = ("duckdb", "spark")
#: the Spark master used when none is configured: two local cores
DEFAULT_SPARK_MASTER = "local[2]"


def lake_reader(lake: Lake | None) -> CallReader:
    """The ``duckdb`` engine: sealed hours of ``lake`` through DuckDB plus the store's hot tail
    (:func:`collector.lake.textfeatures.read_windows`); ``lake`` None reads the store only."""

    def calls(
        database_url: str, tenant: str, windows: Sequence[tuple[int, int]], columns: Sequence[str]
    ) -> pa.Table:
        return textfeatures.read_windows(database_url, lake, tenant, windows, columns)

    def texts(
        database_url: str,
        tenant: str,
        windows: Sequence[tuple[int, int]],
        keys: pa.Table,
        columns: Sequence[str],
    ) -> pa.Table:
        return textfeatures.read_texts(database_url, lake, tenant, windows, keys, columns)

    return CallReader(calls, texts)


def spark_reader(session: Any, lake: Lake) -> CallReader:
    """The ``spark`` engine: sealed hours of ``lake`` extracted on ``session`` (a
    ``pyspark.sql.SparkSession``), the hot tail from the store
    (:func:`collector.lake.spark.read_windows`, :func:`collector.lake.spark.read_texts`)."""

    def calls(
        database_url: str, tenant: str, windows: Sequence[tuple[int, int]], columns: Sequence[str]
    ) -> pa.Table:
        return lake_spark.read_windows(session, database_url, lake, tenant, windows, columns)

    def texts(
        database_url: str,
        tenant: str,
        windows: Sequence[tuple[int, int]],
        keys: pa.Table,
        columns: Sequence[str],
    ) -> pa.Table:
        return lake_spark.read_texts(session, database_url, lake, tenant, windows, keys, columns)

    return CallReader(calls, texts)


def spark_session(master: str = DEFAULT_SPARK_MASTER) -> Any:
    """A ``SparkSession`` on ``master`` (``local[2]``, ``spark://host:7077``, ``yarn``, ...),
    or the session already running in this process (``getOrCreate``: a notebook's own session
    keeps its configuration). Spark's own configuration (``spark-defaults.conf``,
    ``PYSPARK_SUBMIT_ARGS``) applies as usual.

    Raises:
        DriftError: pyspark is not installed (``pip install 'driftline[spark]'``, Java 17).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DriftError(
            "the spark engine needs pyspark >= 4.0: pip install 'driftline[spark]' (and Java 17)"
        ) from None
    return (
        SparkSession.builder.master(master)
        .appName("driftline-drift")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
