"""Canary and judge calibration: the issue-16 targets measured through the production path.

Every scenario x metric x candidate share runs ``drift.canary.simulate.simulate`` (the canary
job's ``build_evidence`` -> ``decide`` -> ``next_weights`` on simulated rollouts), and the PPI
interval of the Quality page is checked with half of the thumbs-downs arriving late
(``judges.simulate.late_flag_coverage``, with the old behaviour -- stale pi -- as the peer in the
same run). Targets: false promote / false rollback <= alpha on aa, aa-load-step, ni-boundary;
detection_samples_ratio <= 2 on regression; PPI coverage >= 0.89 at nominal 0.90.

    python benchmarks/canary_calibration.py                   # 200 runs per cell (long)
    python benchmarks/canary_calibration.py --runs 40 --shares 0.05 --metrics mean,proportion

    python benchmarks/canary_calibration.py --runs 0 --ppi-runs 1000   # the PPI figures only

Prints ``RESULT <scenario>.<metric>.share<S>.<rate>=<value>`` lines, then
``RESULT ppi_coverage_late_flags=<c>`` (half of the flags late, pi recomputed),
``RESULT ppi_coverage_no_late_flags=<c>`` (every flag on time: the same figure, since a recomputed
pi judges and weights the same calls) and ``RESULT ppi_coverage_late_flags_stale_pi=<c>``, each
with its binomial standard error sqrt(c(1 - c)/runs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drift.canary.simulate import SCENARIOS, simulate
from drift.canary.simulate_metrics import METRICS
from judges.simulate import late_flag_coverage


def main() -> None:
    """Run the matrix and print RESULT lines (figures depend on --runs; see the docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=200, help="0 skips the canary matrix")
    p.add_argument("--shares", default="0.05,0.25,0.5")
    p.add_argument("--metrics", default=",".join(METRICS))
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--ppi-runs", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    shares = [float(s) for s in args.shares.split(",")] if args.runs > 0 else []
    for share in shares:
        for scenario in args.scenarios.split(","):
            for metric in args.metrics.split(","):
                if scenario == "judge-biased-sampling" and metric != "judge-score":
                    continue
                t0 = time.perf_counter()
                r = simulate(
                    scenario,
                    metric,
                    runs=args.runs,
                    rng=np.random.default_rng(args.seed),
                    share=share,
                )
                key = f"{scenario}.{metric}.share{share:g}"
                print(f"RESULT {key}.false_promote_rate={r.false_promote_rate:.4f}")
                print(f"RESULT {key}.false_rollback_rate={r.false_rollback_rate:.4f}")
                if r.detection_samples_ratio is not None:
                    print(f"RESULT {key}.detection_samples_ratio={r.detection_samples_ratio:.3f}")
                print(
                    f"# {key}: promote={r.promote} rollback={r.rollback} undecided={r.undecided}"
                    f" runs={r.runs} samples_per_look={r.samples_per_look}"
                    f" ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    if args.ppi_runs > 0:
        runs, seed = args.ppi_runs, args.seed
        for key, recompute, late_share in (
            ("ppi_coverage_late_flags", True, 0.5),
            ("ppi_coverage_no_late_flags", True, 0.0),
            ("ppi_coverage_late_flags_stale_pi", False, 0.5),
        ):
            cov, bias = late_flag_coverage(
                runs, seed, recompute=recompute, population=6000, late_share=late_share
            )
            se = np.sqrt(cov * (1.0 - cov) / runs)
            print(
                f"RESULT {key}={cov:.3f} (± {se:.3f}, nominal 0.90, target >= 0.89,"
                f" bias {bias:+.3f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
