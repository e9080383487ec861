"""Power and false-alarm rate of the answer-embedding tests on the answer-topic scenario.

The scenario of ``tests/drift/test_answer_drift.py`` (:mod:`tests.support.answer_topics`):
grounded answers (first sentence of the question's own passage) in the reference; in the
shifted current window a ``--share`` of the answers comes from sports passages instead; the
null current window is grounded too. Answers are embedded once (the run's MiniLM, 128 tokens);
each run draws fresh windows of ``--n`` answers from the embedded pools and applies the run's
two tests (:func:`drift.embeddings.classifier_two_sample_test`,
:func:`drift.embeddings.mean_embedding_distance_test`, 4,999 permutations).

A run of the drift job holds m verdicts (18 signals per segment); BH at q = 0.01 flags both
answer tests when both p-values are ≤ 2q/m (0.0011 for one segment): that cut is reported,
with p < 0.01 and the classifier's held-out AUC.

    .venv/bin/python benchmarks/answer_drift_power.py [--runs 60] [--n 128] [--share 0.5]

Figures in docs/drift-guarantees.md were taken on a shared, busy 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/drift.py shadows drift/

from drift.embeddings import (
    classifier_two_sample_test,
    load_embedder,
    mean_embedding_distance_test,
)
from drift.signals import SIGNALS
from tests.support.answer_topics import answer_pools

Q = 0.01


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--n", type=int, default=128, help="answers per window")
    ap.add_argument("--share", type=float, default=0.5, help="shifted share of current answers")
    ap.add_argument("--pool", type=int, default=800, help="grounded answers embedded")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    grounded, sport = answer_pools()
    if args.pool < 3 * args.n or len(sport) < args.n:
        raise SystemExit("--pool must be >= 3 n and n <= the 462 sports answers")
    t0 = time.perf_counter()
    embedder = load_embedder(max_seq_length=128)
    g = embedder.embed([a for _, a in grounded[: args.pool]]).astype(np.float64)
    s = embedder.embed(sport).astype(np.float64)
    print(f"embedded {len(g) + len(s)} answers in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(args.seed)
    n, k = args.n, round(args.n * args.share)
    cut = 2 * Q / len(SIGNALS)
    out: dict[str, list[tuple[float, float, float]]] = {"shift": [], "null": []}
    for _ in range(args.runs):
        gi, si = rng.permutation(len(g)), rng.permutation(len(s))
        ref = g[gi[:n]]
        windows = {
            "shift": np.vstack([g[gi[n : 2 * n - k]], s[si[:k]]]),
            "null": g[gi[2 * n : 3 * n]],
        }
        for name, cur in windows.items():
            c2st = classifier_two_sample_test(ref, cur, rng=rng)
            cen = mean_embedding_distance_test(ref, cur, rng=rng)
            assert c2st.pvalue is not None and cen.pvalue is not None
            assert c2st.statistic is not None
            out[name].append((c2st.pvalue, cen.pvalue, c2st.statistic))
    for name, rows in out.items():
        a = np.array(rows)
        for j, test in enumerate(("answer_embedding", "answer_centroid")):
            print(
                f"RESULT {name} share={args.share if name == 'shift' else 0} n={n} {test}: "
                f"p<={cut:.2g} in {int((a[:, j] <= cut).sum())}/{args.runs}, "
                f"p<0.01 in {int((a[:, j] < 0.01).sum())}/{args.runs}, "
                f"median p {np.median(a[:, j]):.2g}"
            )
        auc = a[:, 2]
        print(
            f"RESULT {name} AUC min {auc.min():.3f} median {np.median(auc):.3f} max {auc.max():.3f}"
        )


if __name__ == "__main__":
    main()
