"""Rare proportions over longer windows ending now (drift/ratewindows.py): level, power by hours
since the change, the production wiring (look-backs only with a rolling reference), and the
simulation at the defaults with the change's timing stated."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from collector.errors import ConfigError
from drift.calibrated import rate_test
from drift.ratewindows import CURRENT_WEIGHT, window_weights, windowed_rate_test
from drift.runs import DriftSettings, load_drift_settings, rate_lookbacks_s
from drift.simulate import hourly_result_lines, result_lines, simulate, simulate_hourly
from drift.windows import NS, Windows

H = 3600.0
LOOKBACKS = (H, 2 * H)  # the defaults: windows of 2 and 3 hours


def _hours(
    rng: np.random.Generator, rates: list[float], calls: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reference 0/1, current 0/1, reference ages s): hourly ``rates``, the last is current."""
    x = [rng.random(calls) < r for r in rates]
    t = np.concatenate([h + np.sort(rng.random(calls)) for h in range(len(rates) - 1)])
    return np.concatenate(x[:-1]), x[-1], (len(rates) - 1 - t) * H


def test_weights_sum_to_one_and_the_current_window_keeps_its_share() -> None:
    assert window_weights(0) == (1.0,)
    w = window_weights(3)
    assert w[0] == CURRENT_WEIGHT and sum(w) == pytest.approx(1.0) and len(set(w[1:])) == 1
    with pytest.raises(ValueError, match="n_longer"):
        window_weights(-1)


def test_without_lookbacks_it_is_the_plain_rate_test() -> None:
    rng = np.random.default_rng(1)
    ref, cur, age = _hours(rng, [0.01] * 25, 400)
    plain = rate_test(ref, cur)
    same = windowed_rate_test(ref, cur, age, ())
    assert same == plain and same.method == "rate_exact"
    # the one-sided exact test is scipy's binomtest given the total
    one = rate_test(ref, cur, alternative="greater")
    x_r, x_c = int(ref.sum()), int(cur.sum())
    expected = stats.binomtest(
        x_c, x_r + x_c, cur.size / (cur.size + ref.size), alternative="greater"
    )
    assert one.pvalue == pytest.approx(expected.pvalue)


def test_level_holds_under_no_change() -> None:
    """Weighted Bonferroni over nested windows: P(p <= alpha) <= alpha at any dependence."""
    rng = np.random.default_rng(2)
    p = np.array(
        [windowed_rate_test(*_hours(rng, [0.01] * 25, 400), LOOKBACKS).pvalue for _ in range(400)]
    )
    assert (p <= 0.05).mean() <= 0.05 + 0.02  # binomial sd 0.011 at 400 runs
    assert (p <= 0.01).mean() <= 0.01 + 0.01


def test_a_tripling_three_hours_old_is_seen_by_the_longer_windows() -> None:
    """1 % -> 3 % at 400 calls/h since 3 h (two changed hours already in the rolling reference):
    the current hour alone rarely reaches the BH cut for one changed signal among 9 (q/m =
    0.0011); the 3-hour window does."""
    rng = np.random.default_rng(3)
    windowed, plain = [], []
    for _ in range(100):
        ref, cur, age = _hours(rng, [0.01] * 22 + [0.03] * 3, 400)
        windowed.append(windowed_rate_test(ref, cur, age, LOOKBACKS).pvalue)
        plain.append(rate_test(ref, cur).pvalue)
    cut = 0.01 / 9
    assert (np.array(windowed) <= cut).mean() >= 0.8
    assert (np.array(plain) <= cut).mean() <= 0.5


def test_a_window_without_enough_calls_is_skipped_and_errors_name_the_parameter() -> None:
    rng = np.random.default_rng(4)
    ref, cur, age = _hours(rng, [0.05] * 25, 20)  # 20 calls per hour: the current is too small
    res = windowed_rate_test(ref, cur, age, LOOKBACKS)
    assert res.pvalue is not None and res.n_current >= 30  # a longer window decided
    assert windowed_rate_test(ref[:10], cur, age[:10], LOOKBACKS).insufficient_data
    with pytest.raises(ValueError, match="reference_age_s"):
        windowed_rate_test(ref, cur, age[:-1], LOOKBACKS)
    with pytest.raises(ValueError, match="lookbacks_s"):
        windowed_rate_test(ref, cur, age, (-H,))


def test_lookbacks_only_with_a_rolling_reference() -> None:
    s = DriftSettings.model_validate({})
    hour = int(H) * NS

    def win(kind: str, ref_h: int = 24, cur_h: int = 1) -> Windows:
        return Windows(0, ref_h * hour, ref_h * hour, (ref_h + cur_h) * hour, kind)  # type: ignore[arg-type]

    assert rate_lookbacks_s(s, win("rolling")) == LOOKBACKS
    assert rate_lookbacks_s(s, win("rolling", cur_h=2)) == (H,)  # --since 2 h ago
    assert rate_lookbacks_s(s, win("rolling", ref_h=3)) == (H,)  # keep half the reference
    six = DriftSettings.model_validate({"rate_windows_hours": [6, 3, 2, 2]})
    assert rate_lookbacks_s(six, win("rolling")) == (H, 2 * H, 5 * H)
    assert rate_lookbacks_s(s, win("range")) == () == rate_lookbacks_s(s, win("deploy"))
    off = DriftSettings.model_validate({"rate_windows_hours": []})
    assert rate_lookbacks_s(off, win("rolling")) == ()
    with pytest.raises(ConfigError, match="DRIFTLINE_DRIFT_RATE_WINDOWS_HOURS"):
        load_drift_settings(rate_windows_hours=[2.0, -1.0])


def test_simulated_tripling_at_400_calls_per_hour_three_hours_after_the_change() -> None:
    """The issue's target (>= 80 % at 400 calls/h) holds for the run 3 h after the change; the
    run 1 h after it flags ~0.4, 2 h after ~0.7 (benchmarks/drift_calibration.py reports every
    delay)."""
    res = simulate("rare-rate-3x", 400, 50, seed=21, change_hours=3.0)
    assert res.rates["refusal"] >= 0.8, result_lines(res)
    assert max(v for k, v in res.rates.items() if k != "refusal") <= 1 / 50, result_lines(res)


def test_consecutive_hourly_runs_flag_a_tripling_within_three_hours() -> None:
    res = simulate_hourly("rare-rate-3x", 400, 30, seed=22, hours=3)
    assert len(res.detected_within) == 3
    assert res.detected_within[2] >= 0.8, hourly_result_lines(res)
    assert list(res.detected_within) == sorted(res.detected_within)
    assert max(res.false_alarm_rates.values()) <= 1 / 90, hourly_result_lines(res)
    with pytest.raises(ValueError, match="scenario"):
        simulate_hourly("stationary", 400, 1, seed=0)


def test_a_list_that_is_not_json_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRIFTLINE_DRIFT_RATE_WINDOWS_HOURS", "2,3")
    with pytest.raises(ConfigError, match=r"RATE_WINDOWS_HOURS.*JSON"):
        load_drift_settings()
