"""The Alerts page shows failed delivery bodies (``last_error``) to admin keys only, as the
API's ``/alerts/deliveries`` does (attack report item 5: a read key saw a local service's
secret that a receiver's host answered with).

Streamlit's AppTest runs the real app against a real SQLite store holding one notification
whose attempt failed with a body; each role logs in with its own key.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from alerts import outbox
from alerts.grouping import Notification, group_of, notification_id
from alerts.payloads import render
from alerts.receivers import Receiver
from alerts.state import AlertStatus, new_alert
from collector.auth import create_key
from collector.store import engine as store_engine
from tests.dashboard.conftest import APP

LEAK = "SECRET-FROM-INTERNAL-SERVICE-7f3a"


def _store_with_failed_delivery(url: str) -> dict[str, str]:
    store_engine.upgrade(url)
    eng = store_engine.make_engine(url)
    now = time.time()
    rcv = Receiver(name="hook", tenant="acme", kind="generic", url="https://hooks.example.com/")
    a = new_alert("ttft_p95_high", {"service": "chat-api", "severity": "warning"})
    a = replace(a, status=AlertStatus.FIRING, active_since=now, fired_at=now)
    g = group_of(rcv.name, a.labels, ("alertname",))
    n = Notification(
        id=notification_id("acme", g.group_id, 1),
        tenant="acme",
        receiver=rcv.name,
        group_id=g.group_id,
        group_key=g.group_key,
        group_labels=g.group_labels,
        status="firing",
        reason="first notification",
        alerts=(a,),
        created_at=now,
    )
    with Session(eng) as s, s.begin():
        outbox.enqueue_notification(s, n, rcv.kind, render(n, rcv))
    (item,) = outbox.claim_due(eng, now + 1, limit=1, lease_s=60)
    outbox.record_attempt(
        eng,
        item,
        now=now + 1,
        status_code=500,
        error=f"HTTP 500: {LEAK}",
        delivered=False,
        retry_at=None,
        delay_s=None,
        failure_reason="permanent",
    )
    keys = {role: create_key(eng, "acme", role) for role in ("read", "admin")}
    eng.dispose()
    return keys


def _alerts_page_text(url: str, key: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "false")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.text_input[0].input(key)
    at.button[0].click()
    at.run()
    at.switch_page("views/alerts.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    frames = [d.value.to_csv() for d in at.dataframe]
    shown = [str(e.value) for g in (at.markdown, at.caption, at.warning, at.error) for e in g]
    assert any("failure_reason" in f for f in frames)  # the deliveries table is there
    return "\n".join(frames + shown)


def test_a_read_key_sees_no_failed_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    keys = _store_with_failed_delivery(url)
    text = _alerts_page_text(url, keys["read"], monkeypatch)
    assert LEAK not in text
    assert "permanent" in text and "admin keys only" in text


def test_an_admin_key_sees_the_failed_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    keys = _store_with_failed_delivery(url)
    assert LEAK in _alerts_page_text(url, keys["admin"], monkeypatch)
