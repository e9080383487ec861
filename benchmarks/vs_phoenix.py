"""Ingest throughput, driftline vs Arize Phoenix: the same OTLP/HTTP protobuf load, stored spans/s.

Load: bodies built by the real OpenTelemetry SDK, encoded with the OTLP exporter's own encoder,
100 spans per request (~3 KB each): LLM chat calls carrying both the gen_ai semantic conventions
(read by driftline) and the OpenInference keys (``openinference.span.kind=LLM``,
``llm.model_name``, ``llm.token_count.*``, ``input.value``/``output.value``: read by Phoenix).
The systems run one after the other, never together: ``driftline collector --dev`` on a fresh
SQLite file, then ``phoenix serve`` from its own venv (``.cache/phoenix-venv``, created on first
use with ``python3 -m venv`` + ``pip install arize-phoenix``), SQLite default, with
``PHOENIX_WORKING_DIR`` in a temporary directory and OTLP/HTTP on ``--phoenix-port``.

``--clients`` threads send like an exporter: 503/429 is retried after its ``Retry-After``, else
after exponential backoff with jitter (OTLP spec, "OTLP/HTTP Throttling"). Throughput = rows in
each system's SQLite ``spans`` table (polled until every acknowledged span is there, the count
stops growing for ``--settle`` s, or ``--deadline``) / seconds from the first request to the
last growth of that count. Phoenix stores far fewer spans/s, so it is sent fewer of the same
requests (``--phoenix-spans``) and may stop at the deadline: both are rates over identical
requests, which favours neither side; the output says so.

    .venv/bin/python benchmarks/vs_phoenix.py                # default run ~5 min (venv ready)
    .venv/bin/python benchmarks/vs_phoenix.py --skip-install # fail instead of creating the venv

Prints ``RESULT driftline_spans_per_s=<n> spans/s``, ``RESULT phoenix_spans_per_s=<n> spans/s``
and ``RESULT ingest_ratio_vs_phoenix=<x>``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import numpy as np
from rich.progress import Progress, TaskID

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.ingest import stored_spans, wait_healthy  # noqa: E402
from benchmarks.ingest_load import SPANS_PER_REQUEST, build_bodies  # noqa: E402

PHOENIX_VENV = REPO / ".cache" / "phoenix-venv"
PACKAGE = "arize-phoenix"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@dataclass(frozen=True)
class SendStats:
    """What the clients saw: spans acknowledged (HTTP 200), answers by status, send window (s)."""

    acked_spans: int
    requests_ok: int
    rejected_503: int
    rejected_429: int
    other_errors: int
    send_s: float


@dataclass(frozen=True)
class RunResult:
    """One system's run: stored spans, seconds from the first request to the last growth of the
    stored count, stored spans/s, and whether ``--deadline`` ended it before all were stored.
    """

    name: str
    sent: SendStats
    stored_spans: int
    elapsed_s: float
    spans_per_s: float
    cut_by_deadline: bool


def retry_delay_s(retry_after: str | None, attempt: int, rng: np.random.Generator) -> float:
    """Seconds to wait before resending a 503/429 request.

    ``Retry-After`` as delta-seconds or HTTP-date (RFC 9110 §10.2.3) wins; otherwise
    exponential backoff 0.25 s * 2**attempt with ±20 % jitter, capped at 2 s
    (OTLP spec, "OTLP/HTTP Throttling"; jitter as in the OTel Python exporter).
    """
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(retry_after).timestamp() - time.time())
            except (TypeError, ValueError):
                pass
    return float(min(2.0, 0.25 * 2 ** min(attempt, 8)) * rng.uniform(0.8, 1.2))


def send_all(
    url: str, bodies: list[bytes], clients: int, deadline: float, rng: np.random.Generator
) -> SendStats:
    """POST every body to ``url`` from ``clients`` threads, retrying 503/429 until ``deadline``.

    ``deadline`` is a ``time.monotonic()`` value; requests not acknowledged by then are dropped.
    Returns the client-side counts. Raises ValueError if ``clients`` < 1.
    """
    if clients < 1:
        raise ValueError(f"clients must be >= 1, got {clients}")
    lock = threading.Lock()
    todo = list(range(len(bodies)))
    counts: dict[int | str, int] = {200: 0, 503: 0, 429: 0, "err": 0}
    seeds = rng.integers(2**32, size=clients)

    def loop(seed: int, progress: Progress, task: TaskID) -> None:
        local = np.random.default_rng(seed)
        with httpx.Client(timeout=60) as http:
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                attempt = 0
                while time.monotonic() < deadline:
                    try:
                        r = http.post(url, content=bodies[i], headers=PROTOBUF)
                        code, retry_after = r.status_code, r.headers.get("Retry-After")
                    except httpx.HTTPError:
                        code, retry_after = None, None
                    key = code if code in (200, 503, 429) else "err"
                    with lock:
                        counts[key] += 1
                    if code == 200:
                        progress.advance(task)
                        break
                    delay = retry_delay_s(retry_after, attempt, local)
                    time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                    attempt += 1

    t0 = time.perf_counter()
    with Progress(transient=True) as progress:
        task = progress.add_task("  sending", total=len(bodies))
        threads = [
            threading.Thread(target=loop, args=(int(s), progress, task), daemon=True) for s in seeds
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return SendStats(
        acked_spans=counts[200] * SPANS_PER_REQUEST,
        requests_ok=counts[200],
        rejected_503=counts[503],
        rejected_429=counts[429],
        other_errors=counts["err"],
        send_s=time.perf_counter() - t0,
    )


def wait_stored(
    count: Callable[[], int], target: int, t0: float, settle_s: float, deadline: float
) -> tuple[int, float]:
    """Poll ``count()`` until it reaches ``target``, stops growing for ``settle_s``, or deadline.

    Returns (stored spans, seconds from ``t0`` (perf_counter) to the last observed growth).
    """
    last, last_t = count(), time.perf_counter()
    while last < target and time.monotonic() < deadline:
        time.sleep(0.5)
        now = count()
        if now != last:
            last, last_t = now, time.perf_counter()
        elif time.perf_counter() - last_t > settle_s:
            break
    return last, last_t - t0


def run_system(
    name: str,
    url: str,
    bodies: list[bytes],
    count: Callable[[], int],
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> RunResult:
    """Send ``bodies`` to ``url``, wait until stored, and report the stored spans/s."""
    print(f"{name}: {len(bodies)} requests x {SPANS_PER_REQUEST} spans, {args.clients} clients")
    deadline = time.monotonic() + args.deadline
    before = count()
    t0 = time.perf_counter()
    sent = send_all(url, bodies, args.clients, deadline, rng)
    stored, elapsed = wait_stored(
        lambda: count() - before, sent.acked_spans, t0, args.settle, deadline
    )
    cut = stored < len(bodies) * SPANS_PER_REQUEST and time.monotonic() >= deadline
    rate = stored / elapsed if elapsed > 0 else 0.0
    result = RunResult(name, sent, stored, elapsed, rate, cut)
    print(
        f"  acknowledged {sent.acked_spans} spans in {sent.send_s:.1f} s "
        f"({sent.rejected_503} x 503, {sent.rejected_429} x 429, {sent.other_errors} other "
        f"failures, retried); stored {stored} in {elapsed:.1f} s -> {rate:.0f} spans/s"
        + (" (deadline reached: rate over that window)" if cut else "")
    )
    return result


def ensure_phoenix(venv: Path, skip_install: bool) -> Path:
    """Path of the ``phoenix`` executable in ``venv``, creating the venv on first use.

    Raises SystemExit when it is missing and ``skip_install`` is set, or when pip fails.
    """
    exe = venv / "bin" / "phoenix"
    if exe.exists():
        return exe
    if skip_install:
        raise SystemExit(f"{exe} not found and --skip-install given; run once without it")
    print(
        f"Phoenix venv not found: creating {venv} with python3 -m venv + pip install arize-phoenix"
        "\n(first use only; a few minutes and ~1 GB on disk; progress below)",
        flush=True,
    )
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    pip = subprocess.Popen(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar=off", PACKAGE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert pip.stdout is not None
    n = 0
    for line in pip.stdout:
        if line.startswith("Collecting"):
            n += 1
            print(f"\r  resolving/downloading: {n} packages ({line.split()[1][:40]})\x1b[K", end="")
        elif line.startswith(("Installing", "Successfully", "ERROR")):
            print(f"\n  {line.strip()[:160]}", flush=True)
    if pip.wait() != 0 or not exe.exists():
        raise SystemExit(f"pip install arize-phoenix failed (exit {pip.returncode})")
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sqlite_count(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])
    except sqlite3.OperationalError:  # table not created yet
        return 0
    finally:
        conn.close()


def bench_driftline(bodies: list[bytes], args: argparse.Namespace, tmp: Path) -> RunResult:
    """driftline collector (--dev, fresh SQLite) as a subprocess; spans counted in its DB."""
    db_url = f"sqlite:///{tmp}/driftline.db"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "driftline.cli", "collector", "--dev", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--grpc-port", "0", "--log-level", "warning"],
        env={
            **os.environ,
            "DRIFTLINE_DATABASE_URL": db_url,
            "DRIFTLINE_SPOOL_ENABLED": "true" if args.spool else "false",
            "DRIFTLINE_SPOOL_DIR": str(tmp / "spool"),
        },
        cwd=REPO,
    )
    try:
        wait_healthy(url, proc)
        rng = np.random.default_rng(args.seed + 1)
        return run_system(
            "driftline", f"{url}/v1/traces", bodies, lambda: stored_spans(db_url), args, rng
        )
    finally:
        proc.terminate()
        proc.wait(30)


def bench_phoenix(exe: Path, bodies: list[bytes], args: argparse.Namespace, tmp: Path) -> RunResult:
    """``phoenix serve`` (SQLite under PHOENIX_WORKING_DIR=tmp); spans counted in phoenix.db."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", args.phoenix_port)) == 0:
            raise SystemExit(f"port {args.phoenix_port} is in use; pass a free --phoenix-port")
    work = tmp / "phoenix"
    work.mkdir()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(args.phoenix_port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    env.pop("PHOENIX_SQL_DATABASE_URL", None)
    log = (tmp / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{args.phoenix_port}"
    try:
        try:
            wait_healthy(url, proc, timeout_s=180)  # migrations + start-up take 20-60 s here
        except RuntimeError as e:
            raise SystemExit(f"phoenix: {e}; see {tmp / 'phoenix.log'}") from e
        db = work / "phoenix.db"
        rng = np.random.default_rng(args.seed + 2)
        return run_system(
            "phoenix", f"{url}/v1/traces", bodies, lambda: _sqlite_count(db), args, rng
        )
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def main() -> None:
    """Entry point: parse options, run driftline then Phoenix, print the RESULT lines."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    arg = ap.add_argument
    arg("--spans", type=int, default=40_000, help="spans sent to driftline (default 40000)")
    # > Phoenix's 20,000-span in-memory queue, so its 503 back-pressure is part of the run
    arg("--phoenix-spans", type=int, default=30_000, help="spans sent to Phoenix (<= --spans)")
    arg("--clients", type=int, default=8, help="concurrent sending threads (default 8)")
    arg("--phoenix-port", type=int, default=16006, help="Phoenix HTTP/OTLP port (default 16006)")
    arg("--skip-install", action="store_true", help="fail instead of creating the Phoenix venv")
    arg("--deadline", type=float, default=150.0, help="max seconds per system (default 150)")
    arg("--settle", type=float, default=15.0, help="no growth for this long = done (default 15)")
    arg("--seed", type=int, default=7)
    arg("--no-spool", dest="spool", action="store_false", help="driftline acks after the commit")
    args = ap.parse_args()
    for name in ("spans", "phoenix_spans"):
        if getattr(args, name) < SPANS_PER_REQUEST:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {SPANS_PER_REQUEST}")
    if args.clients < 1:
        raise ValueError("--clients must be >= 1")

    exe = ensure_phoenix(PHOENIX_VENV, args.skip_install)
    requests = args.spans // SPANS_PER_REQUEST
    phoenix_requests = min(requests, args.phoenix_spans // SPANS_PER_REQUEST)
    print(f"building {requests} requests x {SPANS_PER_REQUEST} spans with the OTel SDK")
    bodies = build_bodies(requests, np.random.default_rng(args.seed))
    print(f"body size: {np.mean([len(b) for b in bodies]) / 1024:.0f} KiB per request")
    with tempfile.TemporaryDirectory(prefix="driftline-vs-phoenix-") as tmp:
        dl = bench_driftline(bodies, args, Path(tmp))
        ph = bench_phoenix(exe, bodies[:phoenix_requests], args, Path(tmp))
    print(
        f"note: Phoenix was sent {phoenix_requests} of the {requests} identical requests "
        f"({phoenix_requests * SPANS_PER_REQUEST} spans) so that its part ends in time"
        + (f", and stopped at the {args.deadline:.0f} s deadline" if ph.cut_by_deadline else "")
        + "; both figures are stored spans per second (a rate), so this favours neither side"
    )
    print(f"RESULT driftline_spans_per_s={dl.spans_per_s:.0f} spans/s")
    print(f"RESULT phoenix_spans_per_s={ph.spans_per_s:.0f} spans/s")
    ratio = dl.spans_per_s / ph.spans_per_s if ph.spans_per_s > 0 else float("nan")
    print(f"RESULT ingest_ratio_vs_phoenix={ratio:.1f}")


if __name__ == "__main__":
    main()
