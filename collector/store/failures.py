"""Which store failures pass (retry the same write later) and which never will (the data).

One rule for the writer, the log joiner and the spool processor: a write that failed because
the store is unreachable, shutting down, out of resources or busy is *transient* (nothing was
committed; the same write succeeds once the store is back); anything else, above all the
driver's integrity, data and programming errors and Python's own ``OverflowError`` /
``ValueError`` on binding a value, is *permanent* for that data: retrying it stops everything
behind it.

Classified by the driver's exception types and codes, never by the message alone:

* PostgreSQL (psycopg): SQLSTATE class ``08`` (connection exception), ``53`` (insufficient
  resources: disk full, out of memory, too many connections), ``57P01``-``57P05`` (admin or
  crash shutdown, cannot connect now, idle session timeout), ``40001`` / ``40P01``
  (serialization failure, deadlock), ``55P03`` (lock not available), ``57014`` (statement
  cancelled, e.g. ``statement_timeout`` while a table is locked); an ``OperationalError`` or
  ``InterfaceError`` without a SQLSTATE (the connection failed before the server answered).
  Source: PostgreSQL manual, appendix A "PostgreSQL Error Codes".
* SQLite (sqlite3): primary result codes ``SQLITE_BUSY`` (5), ``SQLITE_LOCKED`` (6),
  ``SQLITE_NOMEM`` (7), ``SQLITE_READONLY`` (8), ``SQLITE_IOERR`` (10), ``SQLITE_FULL`` (13),
  ``SQLITE_CANTOPEN`` (14), ``SQLITE_PROTOCOL`` (15). Source: https://sqlite.org/rescode.html.
* SQLAlchemy's ``connection_invalidated`` (a disconnect it detected itself).
"""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from collector.errors import QueueFullError, StoreUnavailableError

_PG_TRANSIENT_CLASSES = frozenset({"08", "53"})
_PG_TRANSIENT_CODES = frozenset(
    {"57P01", "57P02", "57P03", "57P04", "57P05", "40001", "40P01", "55P03", "57014"}
)
_SQLITE_TRANSIENT = frozenset({5, 6, 7, 8, 10, 13, 14, 15})

#: the ``reason`` labels of a permanent failure (``driftline_spool_quarantined_records_total``)
REASONS = ("integrity", "data", "programming", "decode", "overflow", "value", "other")


def _driver_transient(exc: DBAPIError) -> bool:
    orig = exc.orig
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _SQLITE_TRANSIENT
    if type(orig).__module__.split(".", 1)[0] == "psycopg":
        state = getattr(orig, "sqlstate", None)
        if state is None:
            return isinstance(exc, OperationalError | InterfaceError)
        return state[:2] in _PG_TRANSIENT_CLASSES or state in _PG_TRANSIENT_CODES
    return False


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` means "the store (or this process's capacity) is unavailable now":
    retry the same write later. False: the data itself fails, retrying it never helps."""
    if isinstance(exc, StoreUnavailableError | QueueFullError | BrokenProcessPool):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        return _driver_transient(exc)
    return False


def reason_of(exc: BaseException) -> str:
    """The short, bounded label of a permanent failure: one of :data:`REASONS`."""
    from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError

    from collector.errors import BadRequestError, DecodeError

    cause: BaseException = exc
    while isinstance(cause, BadRequestError) and cause.__cause__ is not None:
        cause = cause.__cause__  # the store's refusal behind the writer's wrapper
    for types, label in (
        (IntegrityError, "integrity"),
        (DataError, "data"),
        (ProgrammingError, "programming"),
        (DecodeError, "decode"),
        (OverflowError, "overflow"),
        (ValueError, "value"),
    ):
        if isinstance(cause, types):
            return label
    if isinstance(cause, DBAPIError):  # e.g. sqlite3's OperationalError "too many variables"
        return "programming"
    return "other"
