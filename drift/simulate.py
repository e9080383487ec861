"""Simulated traffic for checking the drift monitor's false-alarm rate and power at its defaults.

``driftline drift simulate`` (and ``benchmarks/drift_calibration.py``) generate 25 hours of calls
per run — the default reference (24 h) and current window (1 h) — and hand them to
:func:`drift.columnar.evaluate_columns` exactly as :func:`drift.runs.run_drift` does after
extraction: per-call columns in time order, category codes, judge scores with their weights
1/π, ``min_samples`` and the BH level from :class:`drift.runs.DriftSettings` defaults. Nothing
is tuned per scenario; the same generator feeds every scenario.

Traffic model (per call, in time order): Poisson arrivals at ``calls_per_hour``; a latent load
z (i.i.d. N(0, 1), or AR(1) over consecutive calls with ``rho``); heavy-tailed numbers:
``e2e_s`` = lognormal(σ = 1) driven by z, ``ttft_s`` = lognormal(σ = 0.8) partly driven by z,
``output_tokens`` = rounded lognormal (ties); rare events: refusal 1 %, empty output 0.5 %,
guardrail hit 2 %, thumbs-down 5 % among the 10 % of calls that get feedback (others null);
finish reason stop / length / content_filter 90 / 8 / 2 %; judge score (1..5) of a sample with
unequal inclusion probabilities (thumbs-down calls π = 1, others π = 0.05 in the reference and
0.15 in the current window: the sampler's budget changed), thumbs-down calls scoring lower.

Scenarios: ``stationary``; ``ar1`` (z is AR(1), ``rho``); ``daily-cycle`` (volume × (1 + 0.5
sin), log-latency mean + 0.5 sd × sin, event rates × (1 + 0.5 sin), random phase per run);
``shift`` (``e2e_s``'s log mean + 0.5 sd in the current window: detection target);
``rare-rate-3x`` (refusal 1 % → 3 % in the current window: detection target).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter

from drift.columnar import ColumnWindow, evaluate_columns
from drift.runs import DriftSettings

SCENARIOS = ("stationary", "ar1", "daily-cycle", "shift", "rare-rate-3x")
TARGETS = {"shift": "e2e_s", "rare-rate-3x": "refusal"}
HOURS_REF = 24
NUMERIC = ("e2e_s", "ttft_s", "output_tokens")
RATES = {"refusal": 0.01, "empty_output": 0.005, "guardrail_hit": 0.02}
FINISH = (("stop", 0.90), ("length", 0.08), ("content_filter", 0.02))


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """Per-signal drift rates over ``runs`` runs.

    Attributes:
        rates: signal → share of runs in which it was flagged (false-alarm rate for a null
            signal, detection rate for the scenario's target).
        any_rate: share of runs in which any non-target signal was flagged.
        target: the signal the scenario changes (``None``: null scenario).
        insufficient: signal → share of runs where it had not enough data to test.
    """

    scenario: str
    calls_per_hour: float
    runs: int
    rates: dict[str, float]
    any_rate: float
    target: str | None
    insufficient: dict[str, float]


def _latent(rng: np.random.Generator, n: int, rho: float) -> NDArray[np.float64]:
    e = rng.standard_normal(n)
    if rho == 0.0:
        return e
    # stationary start: the state before the first call is rho * N(0, 1)
    z, _ = lfilter([np.sqrt(1.0 - rho**2)], [1.0, -rho], e, zi=[rho * rng.standard_normal()])
    return np.asarray(z)


def _codes(
    rng: np.random.Generator, probs: NDArray[np.float64] | float, n: int
) -> NDArray[np.int64]:
    return (rng.random(n) < probs).astype(np.int64)


def simulate_windows(
    scenario: str,
    calls_per_hour: float,
    rng: np.random.Generator,
    *,
    rho: float = 0.8,
    base_rate: float = 0.01,
) -> list[ColumnWindow]:
    """One run's columns (reference 24 h, current 1 h, one segment), as extraction builds them.

    Raises:
        ValueError: unknown scenario, ``calls_per_hour`` ≤ 0, ``rho`` outside [0, 1).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if not calls_per_hour > 0:
        raise ValueError(f"calls_per_hour must be > 0, got {calls_per_hour!r}")
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho!r}")
    cycle = scenario == "daily-cycle"
    phase = rng.uniform(0, 2 * np.pi)
    hours = np.arange(HOURS_REF + 1)
    wave = np.sin(2 * np.pi * hours / 24 + phase) if cycle else np.zeros(hours.size)
    counts = rng.poisson(calls_per_hour * (1 + 0.5 * wave))
    t = np.concatenate([h + np.sort(rng.random(c)) for h, c in zip(hours, counts, strict=True)])
    hour = t.astype(np.int64)
    cur = hour == HOURS_REF
    n = t.size
    z = _latent(rng, n, rho if scenario == "ar1" else 0.0)
    level = 0.5 * wave[hour]
    shift = np.where(cur, 0.5, 0.0) if scenario == "shift" else 0.0
    e2e = np.exp(0.5 + 1.0 * (0.7 * z + 0.71 * rng.standard_normal(n) + level + shift))
    ttft = np.exp(-1.5 + 0.8 * (0.5 * z + 0.87 * rng.standard_normal(n) + level))
    tokens = np.round(np.exp(5.0 + 0.6 * (0.5 * z + 0.87 * rng.standard_normal(n) + level)))
    rate_mult = 1 + 0.5 * wave[hour]
    cols = {"e2e_s": e2e, "ttft_s": ttft, "output_tokens": tokens}
    codes: dict[str, tuple[NDArray[np.int64], tuple[Hashable, ...]]] = {}
    rates = dict(RATES, refusal=base_rate)
    for name, p in rates.items():
        pr = p * rate_mult
        if name == "refusal" and scenario == "rare-rate-3x":
            pr = np.where(cur, 3 * pr, pr)
        codes[name] = (_codes(rng, pr, n), (False, True))
    feedback = rng.random(n) < 0.10
    down = _codes(rng, 0.05 * rate_mult, n)
    codes["thumbs_down"] = (np.where(feedback, down, -1), (False, True))
    u = rng.random(n)
    cuts = np.cumsum([p for _, p in FINISH])
    codes["finish_reason"] = (
        np.searchsorted(cuts, u * cuts[-1]).astype(np.int64),
        tuple(c for c, _ in FINISH),
    )
    flagged = (down == 1) & feedback
    pi = np.where(flagged, 1.0, np.where(cur, 0.15, 0.05))
    judged = rng.random(n) < pi
    score = np.clip(np.round(4.0 - 1.5 * flagged + rng.normal(0, 0.8, n)), 1, 5)
    cols["judge_score"] = np.where(judged, score, np.nan)
    weights = 1.0 / pi
    out: list[ColumnWindow] = []
    for name, values in cols.items():
        judge = name == "judge_score"
        out.append(
            ColumnWindow(
                name,
                "numerical",
                None,
                reference=values[~cur],
                current=values[cur],
                ordered=True,
                reference_weights=weights[~cur] if judge else None,
                current_weights=weights[cur] if judge else None,
            )
        )
    for name, (code, cats) in codes.items():
        rc, cc = code[~cur], code[cur]
        k = len(cats)
        out.append(
            ColumnWindow(
                name,
                "categorical",
                None,
                reference_counts=dict(enumerate(np.bincount(rc[rc >= 0], minlength=k).tolist())),
                current_counts=dict(enumerate(np.bincount(cc[cc >= 0], minlength=k).tolist())),
                reference_nulls=int((rc < 0).sum()),
                current_nulls=int((cc < 0).sum()),
                reference_codes=rc,
                current_codes=cc,
                categories=cats,
            )
        )
    return out


def simulate(
    scenario: str,
    calls_per_hour: float,
    runs: int,
    seed: int,
    *,
    rho: float = 0.8,
    base_rate: float = 0.01,
    settings: DriftSettings | None = None,
) -> SimulationResult:
    """Run ``runs`` simulated drift runs through :func:`drift.columnar.evaluate_columns` with
    the drift settings' ``min_samples`` and ``fdr_q`` (defaults unless ``settings`` given).

    Raises:
        ValueError: bad scenario / sizes (see :func:`simulate_windows`), ``runs`` < 1.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs!r}")
    s = settings if settings is not None else DriftSettings.model_validate({})
    rng = np.random.default_rng(seed)
    flagged: dict[str, int] = {}
    insufficient: dict[str, int] = {}
    target = TARGETS.get(scenario)
    any_other = 0
    for _ in range(runs):
        windows = simulate_windows(scenario, calls_per_hour, rng, rho=rho, base_rate=base_rate)
        report, _ = evaluate_columns(windows, min_samples=s.min_samples, fdr_q=s.fdr_q, rng=rng)
        other = False
        for r in report.results:
            flagged[r.signal] = flagged.get(r.signal, 0) + bool(r.drifted)
            insufficient[r.signal] = insufficient.get(r.signal, 0) + r.result.insufficient_data
            other = other or (bool(r.drifted) and r.signal != target)
        any_other += other
    return SimulationResult(
        scenario, calls_per_hour, runs,
        {k: v / runs for k, v in flagged.items()}, any_other / runs, target,
        {k: v / runs for k, v in insufficient.items()},
    )  # fmt: skip


def result_lines(res: SimulationResult) -> list[str]:
    """``RESULT`` lines: per-signal false-alarm (or detection) rates, then the summary."""
    tag = f"scenario={res.scenario} calls_per_hour={res.calls_per_hour:g} runs={res.runs}"
    lines = []
    for sig, rate in sorted(res.rates.items()):
        kind = "detection_rate" if sig == res.target else "false_alarm_rate"
        ins = res.insufficient.get(sig, 0.0)
        lines.append(f"RESULT {kind}.{sig}={rate:.4f} per_run insufficient={ins:.2f} {tag}")
    nulls = [v for k, v in res.rates.items() if k != res.target]
    lines.append(f"RESULT false_alarm_rate={max(nulls):.4f} per_signal_per_run_max {tag}")
    lines.append(f"RESULT any_false_alarm_rate={res.any_rate:.4f} per_run {tag}")
    if res.target is not None:
        lines.append(f"RESULT detection_rate={res.rates[res.target]:.4f} per_run {tag}")
    return lines
