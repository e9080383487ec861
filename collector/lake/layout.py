"""Where the lake's files live and what they hold: paths, the sealed schema, the window size.

Layout (version 1, documented in ``docs/lake.md``; readers need nothing from driftline)::

    <lake>/calls/v1/tenant=<t>/date=<YYYY-MM-DD>/hour=<HH>/data.parquet      one file per hour
    <lake>/summaries/v1/tenant=<t>/month=<YYYY-MM>/data.parquet               per-hour summaries
    <lake>/rollups/v1/tenant=<t>/month=<YYYY-MM>/data.parquet                 per-hour rollups
    <lake>/_manifest/v1/tenant=<t>.json                                       sealed hours

``tenant`` is percent-encoded like Hive does (``urllib.parse.quote`` with no safe characters);
``date`` / ``hour`` are the UTC hour of ``start_unix_nano``. Summaries and rollups (small: a
few rows per hour) are kept in one file per tenant and month, with the hour in the column
``hour_ns``, so a month of them is one file to open. Files are zstd-compressed Parquet,
sorted by ``model, variant, start_unix_nano``. The partition columns are not stored inside the
files (Spark and Trino take them from the path).
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, cast

import fsspec
import pyarrow as pa
from sqlalchemy import Table

from collector.lake.driftsignals import FEATURE_SIGNALS
from collector.sidecar import store_sidecar
from collector.store import arrowfetch
from collector.store.models import LLMCall
from collector.store.schema import CALL_COLUMNS

#: version of the layout and schema below; a breaking change gets a new ``v<N>`` folder
SCHEMA_VERSION = 1
#: width of one sealed window (nanoseconds): one clock hour, UTC
HOUR_NS = 3600 * 10**9
DATA_FILE = "data.parquet"
#: the columns sealed, in file order: every ``llm_calls`` column except ``tenant`` (the path's)
SEALED_COLUMNS: tuple[str, ...] = tuple(c for c in CALL_COLUMNS if c != "tenant")
#: derived 0/1 indicators stored beside them (definitions: :mod:`collector.store.callstats`)
DERIVED_COLUMNS: tuple[str, ...] = ("is_error", "is_rejected", "is_unpriced")
#: per-call text features stored beside them, bool, NULL without captured answer text: the
#: drift-signal registry's ``feature`` signals (definitions and digest:
#: :mod:`collector.lake.textfeatures`)
FEATURE_COLUMNS: tuple[str, ...] = FEATURE_SIGNALS
SORT_KEYS: tuple[str, ...] = ("model", "variant", "start_unix_nano")
COMPRESSION = "zstd"
_CALLS = cast(Table, LLMCall.__table__)


def default_lake_url(database_url: str) -> str:
    """The lake used when ``DRIFTLINE_LAKE_URL`` is unset, one per store (a lake holds sealed
    copies of one store's calls; two stores sharing one would read each other's hours):
    ``<database file>-lake`` beside a SQLite store (``driftline.db-lake``, like its ``-wal``),
    else ``./driftline-data/lake-<host>-<port>-<database>``
    (:func:`collector.sidecar.store_sidecar`)."""
    return store_sidecar(database_url, "lake")


def calls_schema() -> pa.Schema:
    """Arrow schema of a sealed calls file: the sealed, derived and feature columns in that
    order (JSON columns as their JSON text: schema v1; the
    export's ``list<string>`` for ``finish_reasons``/``flags`` would be a retype, i.e. v2)."""
    fields = arrowfetch.column_schema(_CALLS, SEALED_COLUMNS)
    fields += [pa.field(n, pa.int64()) for n in DERIVED_COLUMNS]
    fields += [pa.field(n, pa.bool_()) for n in FEATURE_COLUMNS]
    return pa.schema(fields)


@dataclass(frozen=True)
class Lake:
    """An open lake: an fsspec filesystem and the root path on it.

    Build with :func:`open_lake`. ``root`` has no trailing slash.
    """

    url: str
    fs: Any
    root: str

    def dataset_dir(self, dataset: str) -> str:
        """``<root>/<dataset>/v<SCHEMA_VERSION>`` (``calls`` or ``summaries``)."""
        return f"{self.root}/{dataset}/v{SCHEMA_VERSION}"

    def partition_dir(self, dataset: str, tenant: str, hour_ns: int) -> str:
        """Folder of one sealed hour of ``tenant`` (``hour_ns`` a multiple of :data:`HOUR_NS`)."""
        t = dt.datetime.fromtimestamp(hour_ns // 10**9, tz=dt.UTC)
        return (
            f"{self.dataset_dir(dataset)}/tenant={quote_tenant(tenant)}"
            f"/date={t:%Y-%m-%d}/hour={t:%H}"
        )

    def data_path(self, dataset: str, tenant: str, hour_ns: int) -> str:
        return f"{self.partition_dir(dataset, tenant, hour_ns)}/{DATA_FILE}"

    def month_path(self, dataset: str, tenant: str, hour_ns: int) -> str:
        """The month file of a per-hour dataset (``summaries`` or ``rollups``) holding the rows
        of ``hour_ns``."""
        t = dt.datetime.fromtimestamp(hour_ns // 10**9, tz=dt.UTC)
        folder = f"{self.dataset_dir(dataset)}/tenant={quote_tenant(tenant)}"
        return f"{folder}/month={t:%Y-%m}/{DATA_FILE}"

    def summary_path(self, tenant: str, hour_ns: int) -> str:
        """The month file holding the summaries of ``hour_ns``."""
        return self.month_path("summaries", tenant, hour_ns)

    def rollup_path(self, tenant: str, hour_ns: int) -> str:
        """The month file holding the exact per-hour rollups of ``hour_ns``."""
        return self.month_path("rollups", tenant, hour_ns)

    def tenant_dir(self, dataset: str, tenant: str) -> str:
        return f"{self.dataset_dir(dataset)}/tenant={quote_tenant(tenant)}"

    def manifest_path(self, tenant: str) -> str:
        return f"{self.root}/_manifest/v{SCHEMA_VERSION}/tenant={quote_tenant(tenant)}.json"

    @property
    def protocol(self) -> str:
        p = self.fs.protocol
        return str(p[0] if isinstance(p, tuple | list) else p)

    @property
    def local(self) -> bool:
        """True for a folder on this machine."""
        return self.protocol in ("file", "local")

    def reader_path(self, path: str) -> str:
        """``path`` as DuckDB / Spark open it (local path, or ``scheme://`` URL)."""
        return path if self.local else f"{self.protocol}://{path}"


def quote_tenant(tenant: str) -> str:
    """Hive-style escape of a tenant name for a path segment."""
    return urllib.parse.quote(tenant, safe="")


def unquote_tenant(segment: str) -> str:
    return urllib.parse.unquote(segment)


def open_lake(url: str) -> Lake:
    """The lake at ``url``: a local folder or any fsspec URL (``s3://bucket/lake``,
    ``gs://...``, ``memory://...``; the protocol's fsspec package must be installed). Nothing is
    created until the first seal.

    Raises:
        ValueError: an empty URL or an unknown protocol (names ``DRIFTLINE_LAKE_URL``).
    """
    if not url:
        raise ValueError("DRIFTLINE_LAKE_URL: empty")
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise ValueError(f"DRIFTLINE_LAKE_URL: cannot open {url!r}: {exc}") from None
    root = str(root).rstrip("/")
    lake = Lake(url=url, fs=fs, root=root)
    if lake.local:  # folders are made by the first write
        lake = Lake(url=url, fs=fs, root=os.path.abspath(root))
    return lake


def hour_of(start_ns: int) -> int:
    """Start (ns) of the UTC hour holding ``start_ns``."""
    return start_ns - start_ns % HOUR_NS
