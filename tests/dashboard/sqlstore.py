"""One partly sealed SQLite store shared by the dashboard's aggregation tests
(``test_sqlstats.py``, ``test_summarystats.py``): two tenants' calls over 6.75 hours with odd
error types, GPU costs and engine latencies, hours 0-5 sealed, hour 6 in the store."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from collector.lake import layout, seal
from collector.lake.layout import default_lake_url
from collector.store import bulk
from dashboard import data
from tests.collector.lake import calldata

HOUR = calldata.HOUR_NS
T0 = calldata.T0_NS
NOW = T0 + 6 * HOUR + 3 * HOUR // 4  # hours 0..5 sealed; hour 6 stays in the store
#: error types the rate-limited rule must decide like ``str.strip().lower()`` does
ODD_ERRORS = (" 429 ", "Rate_Limited\t", "\u2003overloaded", "timeout", "429x", "")
RANGES: list[tuple[int, int, tuple[tuple[str, str], ...]]] = [
    (T0, NOW, ()),
    (T0 + HOUR // 2, T0 + 5 * HOUR + 17, ()),
    (T0 + 3 * HOUR, NOW, (("model", "gpt-4o"),)),
    (T0 + 6 * HOUR, NOW, (("variant", "candidate"),)),
    (T0 + HOUR, T0 + 2 * HOUR, (("model", "no-such-model"),)),
]


def make_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, layout.Lake]]:
    """Two tenants' calls with odd error types, GPU costs and engine latencies, sealed up to
    hour 6, the lake where the dashboard looks for it (beside the database)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('sqlstats')}/driftline.db"
    rng = np.random.default_rng(9)
    names = [c.name for c in bulk.CALLS.columns]
    batch = []
    rows = calldata.rows(rng, 2000, span_ns=int(6.5 * HOUR))
    rows += calldata.rows(rng, 300, tenant="other/team", first_id=10_000, span_ns=3 * HOUR)
    for i, row in enumerate(rows):
        rec = dict(zip(names, row, strict=True))
        if rec["status"] == "error":
            rec["error_type"] = ODD_ERRORS[i % len(ODD_ERRORS)]
        if i % 3 == 0:
            rec["gpu_cost_usd"] = float(rng.random()) * 1e-3
        if i % 2 == 0:  # engine-side latencies of the calls an engine served
            rec["itl_p50_s"] = float(rng.exponential(0.02))
            rec["server_ttft_s"] = float(rng.exponential(0.1))
        batch.append(tuple(rec[n] for n in names))
    calldata.load(url, batch)
    lake = layout.open_lake(default_lake_url(url))
    seal.seal_pending(url, lake, now_ns=NOW, delay_s=0)
    data.lake.clear()
    data.calls.clear()
    yield url, lake
    data.lake.clear()
    data.calls.clear()
