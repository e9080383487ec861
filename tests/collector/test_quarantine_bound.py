"""Attack report on issue 35, item 3: the spool's quarantine has a size bound
(``DRIFTLINE_SPOOL_QUARANTINE_MAX_BYTES``: the oldest records dropped whole, counted on
``/metrics``), ``driftline spool quarantine remove ID... | --all``, ids without their zero
padding, and ``/healthz`` degraded only while recently quarantined records are still there.

Before: six 5 MB poison requests grew quarantine/ by 31 MB with nothing to remove them, one
poison record per hour kept ``/healthz`` degraded, and ``show 16333442`` (the id unpadded)
failed without saying the expected form."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from collector.spool.log import TRACES_PROTOBUF, Spool
from collector.spool.quarantine import JournalFollower, Quarantine
from driftline.app import create_app
from driftline.commands import spool as spool_cli
from tests.conftest import make_settings, wait_for

#: a body no decoder accepts: quarantined as ``decode``, ~1 KiB each
POISON = b"\xff\x01 not a protobuf message \x00\xfe" * 30
BOUND = 4_000  # a few poison records' files (~0.9 KB body, ~0.6 KB entry), not five


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    settings = make_settings(
        f"sqlite:///{tmp_path}/d.db",
        grpc_enabled=False,
        spool_enabled=True,
        spool_dir=tmp_path / "spool",
        spool_processor="thread",
        spool_quarantine_max_bytes=BOUND,
    )
    with TestClient(create_app(settings)) as c:
        yield c, tmp_path / "spool"


def _poison(c: TestClient, n: int) -> list[int]:
    spool: Spool = c.app.state.driftline.spool  # type: ignore[attr-defined]
    ends = [spool.append(TRACES_PROTOBUF, "a", POISON, time.time_ns()).result(5) for _ in range(n)]
    wait_for(lambda: spool.unprocessed_bytes == 0, timeout_s=20)
    return ends


def _cli(spool_dir: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(spool_cli, ["quarantine", *args, "--spool-dir", str(spool_dir)])
    return r.exit_code, r.output


def _dropped_metric(c: TestClient) -> float:
    for line in c.get("/metrics").text.splitlines():
        if line.startswith("driftline_spool_quarantine_dropped_records "):
            return float(line.split()[1])
    raise AssertionError("driftline_spool_quarantine_dropped_records not on /metrics")


def test_the_quarantine_keeps_the_newest_records_within_its_bound(
    app: tuple[TestClient, Path],
) -> None:
    c, spool_dir = app
    ends = _poison(c, 5)
    q = Quarantine(spool_dir)
    kept = [e.id for e in q.entries()]
    n = len(kept)
    assert 0 < n < 5 and kept == [f"{e:020d}" for e in ends[-n:]]  # the newest kept
    size = q.size_bytes()
    assert size <= BOUND < size * (n + 1) / n  # as many as fit (records of one size)
    assert _dropped_metric(c) == 5 - n
    assert JournalFollower(spool_dir).dropped == 5 - n
    health = c.get("/healthz").json()
    assert health["status"] == "degraded"
    assert health["problems"] == [
        f"{n} spool records quarantined in the last 3600 s (driftline spool quarantine list)"
    ]


def test_tiny_records_with_long_errors_stay_within_the_bound(tmp_path: Path) -> None:
    """The entry (up to 2,000 characters of error) counts, not only the body: 40 records of
    10 bytes would otherwise keep ~100 KB under a 4 KB bound."""
    spool = Spool(tmp_path / "spool")
    try:
        for _ in range(40):
            spool.append(TRACES_PROTOBUF, "a", b"0123456789", time.time_ns()).result(5)
        records = spool.read(0)
    finally:
        spool.close()
    q = Quarantine(tmp_path / "spool", max_bytes=4_000)
    for rec in records:
        q.add(rec, "decode", "e" * 5_000)
    assert 0 < len(q.entries()) < 4 and q.size_bytes() <= 4_000
    assert [e.end for e in q.entries()] == [r.end for r in records[-len(q.entries()) :]]


def test_remove_takes_unpadded_ids_and_clears_healthz(app: tuple[TestClient, Path]) -> None:
    c, spool_dir = app
    first, second = _poison(c, 2)
    code, out = _cli(spool_dir, "show", str(first))  # as in the report: no zero padding
    assert code == 0 and '"reason": "decode"' in out
    code, out = _cli(spool_dir, "show", "16-33")
    assert code == 1 and "00000000000016333442 or 16333442" in out
    code, out = _cli(spool_dir, "remove", str(first), "999")  # one unknown: nothing removed
    assert code == 1 and "999" in out and len(Quarantine(spool_dir).entries()) == 2
    code, out = _cli(spool_dir, "remove")
    assert code == 2 and "--all" in out
    code, out = _cli(spool_dir, "remove", str(first))
    assert code == 0 and "1 records removed" in out
    assert [e.id for e in Quarantine(spool_dir).entries()] == [f"{second:020d}"]
    assert c.get("/healthz").json()["problems"] == [
        "1 spool records quarantined in the last 3600 s (driftline spool quarantine list)"
    ]
    code, out = _cli(spool_dir, "remove", "--all")
    assert code == 0 and "1 records removed" in out
    health = c.get("/healthz").json()
    assert health["status"] == "ok" and "problems" not in health
    assert Quarantine(spool_dir).entries() == []


def test_a_record_larger_than_the_bound_is_dropped_and_counted(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    try:
        end = spool.append(TRACES_PROTOBUF, "a", POISON * 10, time.time_ns()).result(5)
        (rec,) = spool.read(0)
    finally:
        spool.close()
    q = Quarantine(tmp_path / "spool", max_bytes=BOUND)
    entry, new = q.add(rec, "decode", "not a protobuf")
    assert new and entry.id == f"{end:020d}"
    assert q.entries() == [] and q.size_bytes() == 0
    follower = JournalFollower(tmp_path / "spool")
    assert follower.dropped == 1 and follower.count_since(0) == 0
