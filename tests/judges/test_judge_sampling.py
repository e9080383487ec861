"""The judge sampler: determinism, rates, flagged calls, budget and inclusion probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judges.sampling import (
    LATE_FLAG_STRATUM,
    BudgetUsage,
    CallFeatures,
    DailyBudget,
    SamplingPolicy,
    StratumRate,
    design_rate,
    hash_unit,
    late_flagged,
    sample_batch,
)


def _calls(n: int, **features: object) -> list[CallFeatures]:
    return [CallFeatures(call_id=f"call-{i:06d}", **features) for i in range(n)]  # type: ignore[arg-type]


def _within(observed: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    return abs(observed - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


def test_hash_unit_is_deterministic_uniform_and_salted() -> None:
    ids = [f"trace-{i}" for i in range(5000)]
    units = [hash_unit(i, "s1") for i in ids]
    assert units == [hash_unit(i, "s1") for i in ids]
    assert all(0.0 <= u < 1.0 for u in units)
    assert stats.kstest(units, "uniform").pvalue > 1e-3
    other = [hash_unit(i, "s2") for i in ids]
    assert abs(float(np.corrcoef(units, other)[0, 1])) < 0.1


def test_decisions_do_not_depend_on_batch_order_or_composition() -> None:
    policy = SamplingPolicy(base_rate=0.3)
    calls = _calls(2000)
    full = {d.call_id: d for d in sample_batch(calls, policy)}
    rng = np.random.default_rng(7)
    shuffled = [calls[i] for i in rng.permutation(len(calls))]
    for decision in sample_batch(shuffled, policy):
        assert decision == full[decision.call_id]
    subset = shuffled[:300]
    for decision in sample_batch(subset, policy):
        assert decision == full[decision.call_id]


def test_stratum_rates_within_binomial_tolerance() -> None:
    policy = SamplingPolicy(
        base_rate=0.05,
        strata=(
            StratumRate(tenant="bulk", rate=0.01),
            StratumRate(model="small-model", rate=0.5),
        ),
        candidate_rate=0.3,
    )
    n = 8000

    def group(prefix: str, **features: object) -> list[CallFeatures]:
        return [CallFeatures(f"{prefix}-{i}", **features) for i in range(n)]  # type: ignore[arg-type]

    groups = {
        "base": (group("base", model="big-model", tenant="acme"), 0.05),
        "bulk": (group("bulk", model="small-model", tenant="bulk"), 0.01),
        "small": (group("small", model="small-model", tenant="acme"), 0.5),
        "candidate": (group("cand", model="big-model", variant="v2", candidate_arm=True), 0.3),
    }
    for name, (calls, rate) in groups.items():
        decisions = sample_batch(calls, policy)
        sampled = sum(d.sampled for d in decisions)
        assert _within(sampled, n, rate), (name, sampled)
        assert {d.inclusion_probability for d in decisions} == {rate}, name
        assert {d.design_rate for d in decisions} == {rate}, name
    assert design_rate(groups["bulk"][0][0], policy).stratum == "tenant=bulk"
    assert design_rate(groups["candidate"][0][0], policy).stratum == "base+candidate"


def test_flagged_calls_are_always_judged() -> None:
    policy = SamplingPolicy(base_rate=0.0)
    calls = _calls(50, thumbs_down=True) + [
        CallFeatures(f"esc-{i}", escalated=True) for i in range(50)
    ]
    decisions = sample_batch(calls, policy)
    assert all(d.sampled and d.inclusion_probability == 1.0 for d in decisions)
    assert {d.reason for d in decisions} == {"flagged"}
    unflagged = sample_batch(_calls(100), policy)
    assert not any(d.sampled for d in unflagged)


def test_call_budget_is_respected_and_pi_stays_usable_for_horvitz_thompson() -> None:
    budget = DailyBudget(max_calls=300)
    policy = SamplingPolicy(base_rate=0.2, budget=budget)
    n = 20000  # 4000 expected without the budget
    calls = _calls(n - 20) + [CallFeatures(f"angry-{i}", thumbs_down=True) for i in range(20)]
    decisions = sample_batch(calls, policy)
    sampled = [d for d in decisions if d.sampled]
    assert len(sampled) == 300
    assert all(d.sampled for d in decisions if d.call_id.startswith("angry-"))
    # Sequential Poisson sampling: π = s·r, so Σ 1/π over the sample estimates the batch size.
    ht_total = sum(1.0 / d.inclusion_probability for d in sampled if d.inclusion_probability)
    assert ht_total == pytest.approx(n, rel=0.12)
    cut = [d for d in decisions if d.reason == "budget_exhausted"]
    assert cut and all(not d.sampled for d in cut)


def test_usd_budget_with_usage_and_pacing() -> None:
    budget = DailyBudget(max_usd=1.0, cost_per_judgement_usd=0.01)
    policy = SamplingPolicy(base_rate=1.0, budget=budget)
    calls = _calls(500)
    assert sum(d.sampled for d in sample_batch(calls, policy)) == 100
    spent = BudgetUsage(calls=60, usd=0.6)
    assert sum(d.sampled for d in sample_batch(calls, policy, usage=spent)) == 40
    paced = sample_batch(calls, policy, usage=BudgetUsage(calls=10, usd=0.1), day_fraction=0.25)
    assert sum(d.sampled for d in paced) == 15
    pricey = [CallFeatures(c.call_id, judge_cost_usd=0.05) for c in calls]
    assert sum(d.sampled for d in sample_batch(pricey, policy)) == 20
    exhausted = sample_batch(calls, policy, usage=BudgetUsage(calls=100, usd=1.0))
    assert not any(d.sampled for d in exhausted)


def test_budget_cut_flagged_calls_carry_their_true_probability() -> None:
    """Flagged calls are admitted in increasing hash unit: admitted iff u < s_f (the unit of the
    first one cut), so admitted and cut calls alike had probability s_f."""
    policy = SamplingPolicy(base_rate=0.5, budget=DailyBudget(max_calls=5))
    decisions = sample_batch(_calls(10, escalated=True), policy)
    assert sum(d.sampled for d in decisions) == 5
    units = sorted(d.hash_unit for d in decisions)
    assert all(d.inclusion_probability == pytest.approx(units[5]) for d in decisions)
    assert all(d.sampled == (d.hash_unit < units[5]) for d in decisions)
    cut = [d for d in decisions if not d.sampled]
    assert all(d.reason == "budget_exhausted" for d in cut)


def test_budget_cut_flagged_probability_is_unbiased_for_horvitz_thompson() -> None:
    """Sum over admitted flagged calls of 1/pi estimates the number of flagged calls."""
    policy = SamplingPolicy(base_rate=0.0, budget=DailyBudget(max_calls=40))
    totals = []
    for batch in range(200):
        calls = [CallFeatures(f"b{batch}-{i}", thumbs_down=True) for i in range(100)]
        decisions = sample_batch(calls, policy)
        totals.append(sum(1 / d.inclusion_probability for d in decisions if d.sampled))
    assert np.mean(totals) == pytest.approx(100, rel=0.05)


def test_late_flag_makes_the_call_certain() -> None:
    decision = sample_batch([CallFeatures("x")], SamplingPolicy(base_rate=0.05))[0]
    late = late_flagged(decision)
    assert late.sampled and late.inclusion_probability == 1.0
    assert late.stratum == LATE_FLAG_STRATUM and late.reason == "flagged"


def test_invalid_inputs_name_the_parameter() -> None:
    policy = SamplingPolicy(base_rate=0.1)
    with pytest.raises(ValueError, match="duplicate call_id"):
        sample_batch([CallFeatures("a"), CallFeatures("a")], policy)
    with pytest.raises(ValueError, match="day_fraction"):
        sample_batch(_calls(3), policy, day_fraction=0.0)
    with pytest.raises(ValueError, match="usage"):
        sample_batch(_calls(3), policy, usage=BudgetUsage(calls=-1))
    with pytest.raises(ValueError, match="base_rate"):
        SamplingPolicy(base_rate=1.5)
    with pytest.raises(ValueError, match="at least one of model, variant, tenant"):
        StratumRate(rate=0.2)
    with pytest.raises(ValueError, match="cost_per_judgement_usd"):
        DailyBudget(max_usd=5.0)
