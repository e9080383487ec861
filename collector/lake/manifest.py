"""The manifest: which hours of a tenant are sealed, and the fingerprint each was sealed at.

One JSON document per tenant (``<lake>/_manifest/v1/tenant=<t>.json``), replaced atomically
(written to a temporary name, then renamed; on object stores a PUT is atomic by itself).
driftline's query layer reads only the hours listed here: an hour whose data file was renamed
into place but whose manifest entry was not yet written (a crash between the two steps) is
still read from the store, so it is never counted twice nor missed. External readers that glob
the folders see only complete files (temporary files start with ``.`` and end in ``.tmp``).

Document::

    {"version": 1, "tenant": "acme",
     "hours": {"<hour_start_unix_ns>": {"rows": 1234, "fingerprint": "…",
                                          "sealed_unix_nano": …}}}
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from collector.lake.layout import SCHEMA_VERSION, Lake, unquote_tenant


@dataclass(frozen=True, slots=True)
class Entry:
    """One sealed hour: calls in it, the store fingerprint it was sealed from, when (unix ns)."""

    rows: int
    fingerprint: str
    sealed_unix_nano: int


@dataclass
class Manifest:
    """Sealed hours of one tenant, keyed by the hour's start (unix ns)."""

    tenant: str
    hours: dict[int, Entry] = field(default_factory=dict)

    def sealed_in(self, since_ns: int | None, until_ns: int | None) -> list[int]:
        """Sealed hours lying entirely inside ``[since_ns, until_ns)`` (None = open), sorted."""
        from collector.lake.layout import HOUR_NS

        out = []
        for h in self.hours:
            if (since_ns is None or h >= since_ns) and (
                until_ns is None or h + HOUR_NS <= until_ns
            ):
                out.append(h)
        return sorted(out)


def write_atomic(lake: Lake, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old or the new file, never a part."""
    parent, _, name = path.rpartition("/")
    lake.fs.makedirs(parent, exist_ok=True)
    tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
    with lake.fs.open(tmp, "wb") as fh:
        fh.write(data)
    lake.fs.mv(tmp, path)


def load(lake: Lake, tenant: str) -> Manifest:
    """The tenant's manifest (empty when nothing is sealed yet).

    Raises:
        ValueError: the document has another schema version.
    """
    path = lake.manifest_path(tenant)
    if not lake.fs.exists(path):
        return Manifest(tenant)
    with lake.fs.open(path, "rb") as fh:
        doc = json.loads(fh.read())
    if doc.get("version") != SCHEMA_VERSION:
        raise ValueError(f"lake manifest {path}: version {doc.get('version')!r} not supported")
    hours = {
        int(k): Entry(int(v["rows"]), str(v["fingerprint"]), int(v["sealed_unix_nano"]))
        for k, v in doc["hours"].items()
    }
    return Manifest(tenant, hours)


def save(lake: Lake, manifest: Manifest) -> None:
    """Replace the tenant's manifest atomically."""
    doc = {
        "version": SCHEMA_VERSION,
        "tenant": manifest.tenant,
        "hours": {
            str(h): {
                "rows": e.rows,
                "fingerprint": e.fingerprint,
                "sealed_unix_nano": e.sealed_unix_nano,
            }
            for h, e in sorted(manifest.hours.items())
        },
    }
    write_atomic(lake, lake.manifest_path(manifest.tenant), json.dumps(doc).encode())


def tenants(lake: Lake) -> list[str]:
    """Tenants with a manifest, sorted."""
    folder = f"{lake.root}/_manifest/v{SCHEMA_VERSION}"
    if not lake.fs.exists(folder):
        return []
    out = []
    for p in lake.fs.ls(folder, detail=False):
        name = str(p).rsplit("/", 1)[-1]
        if name.startswith("tenant=") and name.endswith(".json"):
            out.append(unquote_tenant(name[len("tenant=") : -len(".json")]))
    return sorted(out)
