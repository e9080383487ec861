"""Monte-Carlo check of the Quality page's PPI interval when thumbs-downs arrive late (seeded).

Drives the production pieces: ``judges.sampling.sample_batch`` decides, ``late_flagged`` recomputes
the inclusion probability of a call whose flag arrives after its decision (what
``judges.selection`` does to stored samples), and ``judges.quality.summarize`` estimates (PPI++,
Hajek weights). Used by tests/judges/test_judge_late_flags.py and
benchmarks/canary_calibration.py.
"""

from __future__ import annotations

import numpy as np

from judges.quality import JudgedRow, summarize
from judges.sampling import CallFeatures, SamplingPolicy, late_flagged, sample_batch

POLICY = SamplingPolicy(base_rate=0.1, salt="late-flags")
AUDIT_RATE = 0.25


def late_flag_coverage(
    runs: int, seed: int, *, recompute: bool, population: int = 2000
) -> tuple[float, float]:
    """(coverage of the nominal 90 % PPI interval, mean estimate - truth) over ``runs``.

    Population: latent z ~ N(0, 1), human label round(3 + 1.2 z) on [1, 5], a lenient noisy
    judge; a label <= 2 gets a thumbs-down w.p. 0.6, half of them after the sampling decision.
    ``recompute``: apply ``late_flagged`` (pi = 1) to late-flagged calls; else keep the decision's
    pi (the old behaviour) and judge late-flagged unsampled calls at pi = 1.
    """
    rng = np.random.default_rng(seed)
    covered = 0
    errors = []
    for run in range(runs):
        z = rng.normal(size=population)
        y = np.clip(np.round(3 + 1.2 * z), 1, 5)
        f = np.clip(3.4 + z + rng.normal(scale=0.7, size=population), 1, 5)
        flag = (y <= 2) & (rng.random(population) < 0.6)
        late = flag & (rng.random(population) < 0.5)
        calls = [
            CallFeatures(f"r{seed}-{run}-{i}", thumbs_down=bool(flag[i] and not late[i]))
            for i in range(population)
        ]
        decisions = list(sample_batch(calls, POLICY))
        for i in np.flatnonzero(late):
            d = decisions[i]
            if recompute or not d.sampled:
                decisions[i] = late_flagged(d)
        audit = rng.random(population) < AUDIT_RATE
        rows = [
            JudgedRow(
                group=None,
                rubric="custom",
                judge_model="judge",
                score=float(f[i]),
                discrete_score=None,
                judge_probability=float(d.inclusion_probability or 1.0),
                audit=bool(audit[i]),
                audit_probability=AUDIT_RATE,
                human_score=float(y[i]) if audit[i] else None,
                labelled_at_s=None,
            )
            for i, d in enumerate(decisions)
            if d.sampled
        ]
        ppi = summarize(rows, alpha=0.1).ppi
        assert ppi is not None
        truth = float(y.mean())
        covered += ppi.ci_low <= truth <= ppi.ci_high
        errors.append(ppi.estimate - truth)
    return covered / runs, float(np.mean(errors))
