"""Every page of the dashboard under Streamlit's AppTest against a seeded store.

The store is filled through the collector's OTLP/HTTP and feedback endpoints (see
tests/dashboard/conftest.py); assertions compare what the pages show with what was sent.
"""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.seed_demo import DemoSeed
from tests.dashboard.conftest import APP, N_CALLS

PAGES = ("overview", "latency", "cost", "quality", "review", "drift", "canary", "alerts", "calls")


def open_page(monkeypatch: pytest.MonkeyPatch, url: str, page: str) -> AppTest:
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    if page != "overview":
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert values, f"no metric {label!r} in {[m.label for m in at.metric]}"
    return str(values[0])


def charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def check_page(at: AppTest, page: str, seed: DemoSeed) -> None:
    """Page-specific checks that real numbers from the seed appear."""
    sent = seed.calls.calls
    if page == "overview":
        failed = sum(c.failed for c in sent)
        assert metric(at, "Error rate") == f"{failed / N_CALLS * 100:.1f} %"
        assert metric(at, "Firing alerts") == str(seed.firing_alerts)
        assert metric(at, "Running rollouts") == "1"
        assert metric(at, "TTFT p95").endswith(" ms")
        assert float(metric(at, "TTFT p95").split()[0].replace(",", "")) > 0
        assert metric(at, "Requests / s") == f"{N_CALLS / 86400:.3g}"
    elif page == "latency":
        assert charts(at) >= 4  # percentiles, breakdown bar, 3 engine charts
        assert any("output tokens" in c.value for c in at.caption)
        assert not at.info
    elif page == "cost":
        gateway = sum(c.service == "support-gateway" for c in sent)
        assert metric(at, "Unpriced calls") == str(gateway)
        assert metric(at, "Priced").startswith("$")
        assert float(metric(at, "Priced")[1:]) > 0
    elif page == "quality":
        frames = [d.value for d in at.dataframe]
        rates = next(f for f in frames if "thumbs_up_per_100_calls" in f.columns)
        assert set(rates["variant"]) >= {"base", "lora-v2"}
        assert (rates["thumbs_up_per_100_calls"] > 0).all()
    elif page == "canary":
        assert metric(at, "Status") == "running"
        assert metric(at, "Weights") == "80 % / 20 %"
        assert charts(at) == 1
        audit = at.dataframe[-1].value
        assert "create" in set(audit["action"])
    elif page == "alerts":
        assert metric(at, "Firing") == str(seed.firing_alerts)
        assert int(metric(at, "Resolved (history)")) >= 1  # the drift episode, maybe TTFT
        assert any("sil_" in str(d.value["id"].tolist()) for d in at.dataframe if "id" in d.value)
    elif page == "calls":
        table = at.dataframe[0].value
        assert len(table) == 50
        assert metric(at, "TTFT").endswith("ms")
        assert at.tabs
    elif page in ("review", "drift"):
        # subsystems without seeded data: a clear empty state, never a crash
        assert at.info, f"{page} shows neither data nor an empty state"


@pytest.mark.parametrize("page", PAGES)
def test_page_sqlite(
    page: str, seeded_sqlite: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seed = seeded_sqlite
    check_page(open_page(monkeypatch, url, page), page, seed)


@pytest.mark.postgres
@pytest.mark.parametrize("page", PAGES)
def test_page_postgres(
    page: str, seeded_pg: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seed = seeded_pg
    check_page(open_page(monkeypatch, url, page), page, seed)


def test_latency_percentiles_match_numpy(
    seeded_sqlite: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overview's TTFT p50 is numpy's percentile of the stored TTFTs (type 7)."""
    from collector.store.engine import make_engine
    from collector.store.queries import CallFilter, list_calls

    url, _ = seeded_sqlite
    with make_engine(url).connect() as conn:
        items, _ = list_calls(conn, "default", CallFilter(), limit=1000)
    ttft = [c["ttft_s"] for c in items if c["ttft_s"] is not None]
    at = open_page(monkeypatch, url, "overview")
    assert metric(at, "TTFT p50") == f"{np.percentile(ttft, 50) * 1000:,.0f} ms"
