"""Drift monitor calibration at the defaults: false-alarm rate per signal per run on null traffic
(stationary, AR(1) rho 0.8, daily cycle) at 40-2,000 calls/h, detection rate of a 0.5 sd shift
and of a tripled refusal rate.

Each run goes through :func:`drift.columnar.evaluate_columns` exactly as ``run_drift`` does
(:mod:`drift.simulate`). Baseline in the same run: the same windows without time order / codes /
weights, i.e. the pre-calibration selection table (KS / z / chi-square below 1,000 reference
values, fixed Wasserstein / Jensen-Shannon 0.1 above, distances outside BH).

A tripled refusal rate is reported by the hours between the change and the run
(``change_hours_before_run``: 1 = the change began with the current window; rare proportions
are also tested over 2 / 3 h windows ending now, :mod:`drift.ratewindows`), next to the
current-window-only test (``rate_windows_hours=[]``, the previous default), and as the share of
changes flagged within K consecutive hourly runs (``detected_within_hours.K``).

    .venv/bin/python benchmarks/drift_calibration.py [--runs 200] [--seed 0]

Prints ``RESULT`` lines; figures in docs/drift-guarantees.md were taken on a shared, busy
2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/drift.py shadows drift/

from drift.columnar import evaluate_columns
from drift.runs import DriftSettings
from drift.simulate import (
    hourly_result_lines,
    result_lines,
    simulate,
    simulate_hourly,
    simulate_windows,
)

NULL_GRID = [
    ("stationary", 40),
    ("stationary", 400),
    ("stationary", 2000),
    ("ar1", 40),
    ("ar1", 400),
    ("ar1", 2000),
    ("daily-cycle", 40),
    ("daily-cycle", 400),
    ("daily-cycle", 2000),
]
CHANGE_GRID = [
    ("shift", 400, 1.0),
    ("rare-rate-3x", 400, 1.0),
    ("rare-rate-3x", 400, 2.0),
    ("rare-rate-3x", 400, 3.0),
    ("rare-rate-3x", 400, 6.0),
    ("rare-rate-3x", 1000, 1.0),
]
HOURLY_RUNS = 6


def legacy_false_alarm(scenario: str, calls: float, runs: int, seed: int) -> float:
    """Max per-signal false-alarm rate of the uncalibrated path on the same traffic model."""
    s = DriftSettings.model_validate({})
    rng = np.random.default_rng(seed)
    flagged: dict[str, int] = {}
    for _ in range(runs):
        plain = [
            dataclasses.replace(
                w,
                ordered=False,
                reference_weights=None,
                current_weights=None,
                reference_codes=None,
                current_codes=None,
            )
            for w in simulate_windows(scenario, calls, rng)
        ]
        report, _ = evaluate_columns(plain, min_samples=s.min_samples, fdr_q=0.05, rng=rng)
        for r in report.results:
            flagged[r.signal] = flagged.get(r.signal, 0) + bool(r.drifted)
    return max(flagged.values()) / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--only", choices=["null", "change", "hourly"], default=None)
    args = ap.parse_args()
    current_only = DriftSettings.model_validate({"rate_windows_hours": []})
    cells = [(sc, calls, 1.0) for sc, calls in NULL_GRID] * (args.only in (None, "null"))
    cells += CHANGE_GRID * (args.only in (None, "change"))
    for scenario, calls, change_hours in cells:
        t0 = time.perf_counter()
        res = simulate(scenario, calls, args.runs, args.seed, change_hours=change_hours)
        for line in result_lines(res)[-3 if res.target else -2 :]:
            print(line, flush=True)
        if scenario == "rare-rate-3x":
            alone = simulate(
                scenario, calls, args.runs, args.seed, change_hours=change_hours,
                settings=current_only,
            )  # fmt: skip
            print(
                f"RESULT current_window_only_detection_rate={alone.rates['refusal']:.4f} per_run "
                f"scenario={scenario} calls_per_hour={calls:g} runs={args.runs} "
                f"change_hours_before_run={change_hours:g}",
                flush=True,
            )
        if not args.no_baseline and res.target is None:
            runs = max(20, args.runs // 4)
            base = legacy_false_alarm(scenario, calls, runs, args.seed)
            print(
                f"RESULT baseline_uncalibrated_false_alarm_rate={base:.4f} per_signal_per_run_max "
                f"scenario={scenario} calls_per_hour={calls:g} runs={runs}",
                flush=True,
            )
        print(f"RESULT seconds_per_run={(time.perf_counter() - t0) / args.runs:.3f} s", flush=True)
    if args.only in (None, "hourly"):
        streams = max(20, args.runs // 2)
        for settings, label in ((None, ""), (current_only, "current_window_only_")):
            hourly = simulate_hourly(
                "rare-rate-3x", 400, streams, args.seed, hours=HOURLY_RUNS, settings=settings
            )
            for line in hourly_result_lines(hourly):
                print(line.replace("RESULT ", f"RESULT {label}", 1), flush=True)


if __name__ == "__main__":
    main()
