"""Where a store's side folders go by default: one per store, so two stores never share one.

A lake (:func:`collector.lake.layout.default_lake_url`) and a spool
(``DRIFTLINE_SPOOL_DIR``) each hold data of exactly one store: a spool's unprocessed requests
are written into the store its collector was started on, a lake's files are sealed copies of one
store's calls. Their defaults are derived from ``database_url`` here:

* SQLite ``sqlite:///path/driftline.db`` → ``path/driftline.db-<kind>`` beside the database file
  (like its ``-wal``), so moving or deleting the database's files moves or deletes them too;
* PostgreSQL → ``./driftline-data/<kind>-<host>-<port>-<database>`` (plus a hash of the URL's
  query, which may select another schema of the same database).
"""

from __future__ import annotations

import hashlib
import os
import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


def store_sidecar(database_url: str, kind: str) -> str:
    """Absolute path of the ``kind`` folder (``lake``, ``spool``) of the store at
    ``database_url``; an in-memory or unparsable URL gives ``./driftline-data/<kind>``."""
    fallback = os.path.abspath(f"./driftline-data/{kind}")
    try:
        u = make_url(database_url)
    except ArgumentError:
        return fallback
    if u.get_backend_name() == "sqlite":
        if not u.database or u.database == ":memory:":
            return fallback
        return os.path.abspath(u.database) + f"-{kind}"
    ident = "-".join(str(x) for x in (u.host or "local", u.port or "", u.database or "") if x)
    if u.query:  # e.g. ?options=-csearch_path=... selects another store in the same database
        query = "&".join(f"{k}={v}" for k, v in sorted(u.query.items()))
        ident += "-" + hashlib.sha256(query.encode()).hexdigest()[:12]
    return f"{fallback}-{re.sub(r'[^A-Za-z0-9._-]', '_', ident)}"
