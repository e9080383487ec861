"""Monte-Carlo check of the Quality page's PPI interval when thumbs-downs arrive late (seeded).

Drives the production pieces: ``judges.sampling.sample_batch`` decides, ``late_flagged`` recomputes
the inclusion probability of a call whose flag arrives after its decision (what
``judges.selection`` does to stored samples), and ``judges.quality.summarize`` estimates (PPI++,
Hajek weights, jackknife SE: ``judges.ppi``). Used by tests/judges/test_judge_late_flags.py and
benchmarks/canary_calibration.py.

Why π = 1 is the design probability of a late-flagged call: the policy judges every flagged call,
and one flagged after its decision is judged whether or not it was sampled then, so
P(judged) = P(u_i < r_i) + P(u_i ≥ r_i)·1 = 1 (Horvitz & Thompson 1952). With it the judged set
is, call by call, the one an on-time flag gives: sampled iff flagged or u_i < r_i, so the share
of late flags changes neither the estimate nor its interval (``late_share`` 0 vs 0.5, same seed,
give identical results).
"""

from __future__ import annotations

import numpy as np

from judges.quality import JudgedRow, summarize
from judges.sampling import CallFeatures, SamplingPolicy, late_flagged, sample_batch

POLICY = SamplingPolicy(base_rate=0.1, salt="late-flags")
AUDIT_RATE = 0.25


def late_flag_coverage(
    runs: int,
    seed: int,
    *,
    recompute: bool,
    population: int = 2000,
    late_share: float = 0.5,
) -> tuple[float, float]:
    """(coverage of the nominal 90 % PPI interval, mean estimate - truth) over ``runs``.

    Population of ``population`` calls: latent z ~ N(0, 1), human label round(3 + 1.2 z) on
    [1, 5], a lenient noisy judge 3.4 + z + N(0, 0.7²) on [1, 5]; a label <= 2 gets a
    thumbs-down w.p. 0.6 (~20 % of calls, judged as a census), a fraction ``late_share`` of them
    after the sampling decision; other calls are judged at rate 0.1 and a judged call is audited
    (human label) w.p. 0.25. The truth is the population's mean label.
    ``recompute``: apply ``late_flagged`` (pi = 1) to late-flagged calls; else keep the decision's
    pi (the old behaviour) and judge late-flagged unsampled calls at pi = 1.

    Raises ValueError for ``runs`` or ``population`` < 1 or ``late_share`` outside [0, 1].
    """
    if runs < 1 or population < 1:
        raise ValueError("runs and population must be >= 1")
    if not 0.0 <= late_share <= 1.0:
        raise ValueError("late_share must be in [0, 1]")
    rng = np.random.default_rng(seed)
    covered = 0
    errors = []
    for run in range(runs):
        z = rng.normal(size=population)
        y = np.clip(np.round(3 + 1.2 * z), 1, 5)
        f = np.clip(3.4 + z + rng.normal(scale=0.7, size=population), 1, 5)
        flag = (y <= 2) & (rng.random(population) < 0.6)
        late = flag & (rng.random(population) < late_share)
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
