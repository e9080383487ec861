"""Simulated traffic for checking the drift monitor's false-alarm rate and power at its defaults.

``driftline drift simulate`` (and ``benchmarks/drift_calibration.py``) generate 25 hours of calls
per run — the default reference (24 h) and current window (1 h) — and hand them to
:func:`drift.columnar.evaluate_columns` exactly as :func:`drift.runs.run_drift` does after
extraction: per-call columns in time order, category codes with each reference call's age,
judge scores with their weights 1/π, ``min_samples``, the BH level and the rare-rate look-backs
(:func:`drift.runs.rate_lookbacks_s` of a rolling reference) from
:class:`drift.runs.DriftSettings` defaults. Nothing is tuned per scenario; the same generator
feeds every scenario.

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
``shift`` (``e2e_s``'s log mean + 0.5 sd: detection target); ``rare-rate-3x`` (refusal 1 % →
3 %: detection target). A change starts ``change_hours`` before the run (default 1: with the
current window; 3: two hours before it, so the rolling reference already holds two changed
hours); detection depends on it (:mod:`drift.ratewindows`), so every figure names it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter

from drift.columnar import ColumnWindow, evaluate_columns
from drift.runs import DriftSettings, rate_lookbacks_s
from drift.windows import NS, Windows

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
        change_hours: hours between the start of the scenario's change and the run's end.
    """

    scenario: str
    calls_per_hour: float
    runs: int
    rates: dict[str, float]
    any_rate: float
    target: str | None
    insufficient: dict[str, float]
    change_hours: float = 1.0


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


@dataclass(frozen=True, slots=True)
class _Stream:
    """Per-call columns of a simulated stream; ``t`` in hours since its start, sorted."""

    t: NDArray[np.float64]
    cols: dict[str, NDArray[np.float64]]
    codes: dict[str, tuple[NDArray[np.int64], tuple[Hashable, ...]]]
    weights: NDArray[np.float64]


def _check(scenario: str, calls_per_hour: float, rho: float) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if not calls_per_hour > 0:
        raise ValueError(f"calls_per_hour must be > 0, got {calls_per_hour!r}")
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho!r}")


def _stream(
    scenario: str,
    calls_per_hour: float,
    rng: np.random.Generator,
    *,
    hours: int,
    change_at: float,
    rho: float,
    base_rate: float,
) -> _Stream:
    """``hours`` of calls (module docstring); a change applies to calls from ``change_at`` on;
    the judge sampler's budget rises from hour :data:`HOURS_REF` on (π 0.05 → 0.15)."""
    cycle = scenario == "daily-cycle"
    phase = rng.uniform(0, 2 * np.pi)
    hour_ix = np.arange(hours)
    wave = np.sin(2 * np.pi * hour_ix / 24 + phase) if cycle else np.zeros(hours)
    counts = rng.poisson(calls_per_hour * (1 + 0.5 * wave))
    t = np.concatenate([h + np.sort(rng.random(c)) for h, c in zip(hour_ix, counts, strict=True)])
    hour = t.astype(np.int64)
    changed = t >= change_at
    n = t.size
    z = _latent(rng, n, rho if scenario == "ar1" else 0.0)
    level = 0.5 * wave[hour]
    shift = np.where(changed, 0.5, 0.0) if scenario == "shift" else 0.0
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
            pr = np.where(changed, 3 * pr, pr)
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
    pi = np.where(flagged, 1.0, np.where(t >= HOURS_REF, 0.15, 0.05))
    judged = rng.random(n) < pi
    score = np.clip(np.round(4.0 - 1.5 * flagged + rng.normal(0, 0.8, n)), 1, 5)
    cols["judge_score"] = np.where(judged, score, np.nan)
    return _Stream(t, cols, codes, 1.0 / pi)


def _rolling() -> Windows:
    """The windows of every simulated run: rolling 24 h reference, 1 h current window."""
    hour_ns = 3600 * NS
    return Windows(0, HOURS_REF * hour_ns, HOURS_REF * hour_ns, (HOURS_REF + 1) * hour_ns,
                   "rolling")  # fmt: skip


def _windows(s: _Stream, end_hour: int) -> list[ColumnWindow]:
    """The columns of the run that ends at ``end_hour``: reference the 24 h before the
    current hour ``[end_hour - 1, end_hour)``, as extraction builds them."""
    lo, mid, hi = np.searchsorted(s.t, [end_hour - 1 - HOURS_REF, end_hour - 1, end_hour])
    ref, cur = slice(lo, mid), slice(mid, hi)
    out: list[ColumnWindow] = []
    for name, values in s.cols.items():
        judge = name == "judge_score"
        out.append(
            ColumnWindow(
                name,
                "numerical",
                None,
                reference=values[ref],
                current=values[cur],
                ordered=True,
                reference_weights=s.weights[ref] if judge else None,
                current_weights=s.weights[cur] if judge else None,
            )
        )
    age_s = (end_hour - 1 - s.t[ref]) * 3600.0
    for name, (code, cats) in s.codes.items():
        rc, cc = code[ref], code[cur]
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
                reference_age_s=age_s,
            )
        )
    return out


def simulate_windows(
    scenario: str,
    calls_per_hour: float,
    rng: np.random.Generator,
    *,
    rho: float = 0.8,
    base_rate: float = 0.01,
    change_hours: float = 1.0,
) -> list[ColumnWindow]:
    """One run's columns (reference 24 h, current 1 h, one segment), as extraction builds them.

    ``change_hours``: the change of a ``shift`` / ``rare-rate-3x`` scenario applies to calls
    that start less than this many hours before the run's end.

    Raises:
        ValueError: unknown scenario, ``calls_per_hour`` ≤ 0, ``rho`` outside [0, 1),
            ``change_hours`` outside (0, 25].
    """
    _check(scenario, calls_per_hour, rho)
    if not 0.0 < change_hours <= HOURS_REF + 1:
        raise ValueError(f"change_hours must be in (0, {HOURS_REF + 1}], got {change_hours!r}")
    end = HOURS_REF + 1
    stream = _stream(
        scenario, calls_per_hour, rng, hours=end, change_at=end - change_hours, rho=rho,
        base_rate=base_rate,
    )  # fmt: skip
    return _windows(stream, end)


def simulate(
    scenario: str,
    calls_per_hour: float,
    runs: int,
    seed: int,
    *,
    rho: float = 0.8,
    base_rate: float = 0.01,
    change_hours: float = 1.0,
    settings: DriftSettings | None = None,
) -> SimulationResult:
    """Run ``runs`` simulated drift runs through :func:`drift.columnar.evaluate_columns` with
    the drift settings' ``min_samples``, ``fdr_q`` and rare-rate look-backs (defaults unless
    ``settings`` given), the change ``change_hours`` before each run's end.

    Raises:
        ValueError: bad scenario / sizes (see :func:`simulate_windows`), ``runs`` < 1.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs!r}")
    s = settings if settings is not None else DriftSettings.model_validate({})
    lookbacks = rate_lookbacks_s(s, _rolling())
    rng = np.random.default_rng(seed)
    flagged: dict[str, int] = {}
    insufficient: dict[str, int] = {}
    target = TARGETS.get(scenario)
    any_other = 0
    for _ in range(runs):
        windows = simulate_windows(
            scenario, calls_per_hour, rng, rho=rho, base_rate=base_rate, change_hours=change_hours
        )
        report, _ = evaluate_columns(
            windows, min_samples=s.min_samples, fdr_q=s.fdr_q, rng=rng, rate_lookbacks_s=lookbacks
        )
        other = False
        for r in report.results:
            flagged[r.signal] = flagged.get(r.signal, 0) + bool(r.drifted)
            insufficient[r.signal] = insufficient.get(r.signal, 0) + r.result.insufficient_data
            other = other or (bool(r.drifted) and r.signal != target)
        any_other += other
    return SimulationResult(
        scenario, calls_per_hour, runs,
        {k: v / runs for k, v in flagged.items()}, any_other / runs, target,
        {k: v / runs for k, v in insufficient.items()}, change_hours,
    )  # fmt: skip


def result_lines(res: SimulationResult) -> list[str]:
    """``RESULT`` lines: per-signal false-alarm (or detection) rates, then the summary."""
    tag = f"scenario={res.scenario} calls_per_hour={res.calls_per_hour:g} runs={res.runs}"
    if res.target is not None:
        tag += f" change_hours_before_run={res.change_hours:g}"
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


@dataclass(frozen=True, slots=True)
class HourlyResult:
    """Consecutive hourly runs after a change (the scheduler's default cadence).

    Attributes:
        detected_within: ``[k - 1]`` = share of streams whose target was flagged by at least
            one of the first ``k`` hourly runs after the change (the change starts with the
            first run's current window).
        false_alarm_rates: non-target signal → share of all runs that flagged it.
    """

    scenario: str
    calls_per_hour: float
    streams: int
    target: str
    detected_within: tuple[float, ...]
    false_alarm_rates: dict[str, float]


def simulate_hourly(
    scenario: str,
    calls_per_hour: float,
    streams: int,
    seed: int,
    *,
    hours: int = 6,
    rho: float = 0.8,
    base_rate: float = 0.01,
    settings: DriftSettings | None = None,
) -> HourlyResult:
    """``hours`` consecutive hourly runs on each of ``streams`` simulated streams whose change
    (``shift`` or ``rare-rate-3x``) starts with the first run's current window: how soon the
    monitor flags it, as a share of changes (runs share data, as the scheduler's do).

    Raises:
        ValueError: a scenario without a change, ``streams`` or ``hours`` < 1, bad sizes.
    """
    _check(scenario, calls_per_hour, rho)
    target = TARGETS.get(scenario)
    if target is None:
        raise ValueError(f"scenario must be one of {tuple(TARGETS)}, got {scenario!r}")
    if streams < 1 or hours < 1:
        raise ValueError(f"streams and hours must be >= 1, got {streams!r}, {hours!r}")
    s = settings if settings is not None else DriftSettings.model_validate({})
    lookbacks = rate_lookbacks_s(s, _rolling())
    rng = np.random.default_rng(seed)
    first: list[int] = []
    false: dict[str, int] = {}
    for _ in range(streams):
        stream = _stream(
            scenario, calls_per_hour, rng, hours=HOURS_REF + hours, change_at=HOURS_REF,
            rho=rho, base_rate=base_rate,
        )  # fmt: skip
        hit = hours + 1
        for k in range(1, hours + 1):
            report, _ = evaluate_columns(
                _windows(stream, HOURS_REF + k), min_samples=s.min_samples, fdr_q=s.fdr_q,
                rng=rng, rate_lookbacks_s=lookbacks,
            )  # fmt: skip
            for r in report.results:
                if r.signal == target:
                    hit = min(hit, k) if r.drifted else hit
                else:
                    false[r.signal] = false.get(r.signal, 0) + bool(r.drifted)
        first.append(hit)
    firsts = np.array(first)
    within = tuple(float((firsts <= k).mean()) for k in range(1, hours + 1))
    rates = {k: v / (streams * hours) for k, v in false.items()}
    return HourlyResult(scenario, calls_per_hour, streams, target, within, rates)


def hourly_result_lines(res: HourlyResult) -> list[str]:
    """``RESULT detected_within_hours.K=share`` per K, then the others' max false-alarm rate."""
    tag = f"scenario={res.scenario} calls_per_hour={res.calls_per_hour:g} streams={res.streams}"
    lines = [
        f"RESULT detected_within_hours.{k}={v:.4f} share_of_changes {tag}"
        for k, v in enumerate(res.detected_within, start=1)
    ]
    worst = max(res.false_alarm_rates.values(), default=0.0)
    lines.append(f"RESULT false_alarm_rate={worst:.4f} per_signal_per_run_max {tag}")
    return lines
