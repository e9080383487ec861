"""Decision engine: case 25, decide() tables, next_weights() and policy validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drift.canary.evidence import build_evidence
from drift.canary.policy import (
    Action,
    CanaryObservations,
    CountObservations,
    Decision,
    Direction,
    MetricKind,
    MetricPolicy,
    RolloutPolicy,
    RolloutState,
    SampleObservations,
    StepAssignment,
    decide,
    default_metrics,
    initial_state,
    next_weights,
)
from tests.conftest import CASES

INC, DEC = Direction.INCREASE_IS_BAD, Direction.DECREASE_IS_BAD


def _policy(**kw: object) -> RolloutPolicy:
    base: dict[str, object] = {
        "name": "r1",
        "baseline_variant": "base",
        "candidate_variant": "cand",
        "min_samples_per_step": 200,
        "min_step_duration_s": 600.0,
        "max_duration_s": 3600.0,
        "metrics": (
            MetricPolicy("ttft_s", MetricKind.MEAN, INC, 0.10, relative=True, cap=30.0),
            MetricPolicy("error_rate", MetricKind.RARE_EVENT, INC, 0.5, relative=True),
            MetricPolicy("judge_score", MetricKind.MEAN, DEC, 0.2, role="quality"),
        ),
    }
    base.update(kw)
    return RolloutPolicy(**base)  # type: ignore[arg-type]


def _observations(
    rng: np.random.Generator,
    n: int,
    *,
    ttft_scale: float = 1.0,
    judge_shift: float = 0.0,
    error_rate: float = 0.02,
    elapsed_s: float = 1200.0,
    weight: float = 50.0,
) -> CanaryObservations:
    def ttft(scale: float) -> np.ndarray:
        return scale * rng.lognormal(np.log(0.4), 0.6, n)

    def judge(shift: float) -> np.ndarray:
        return np.clip(rng.normal(4.0 + shift, 0.8, n), 1, 5)

    intervals = 10
    per = n // intervals
    return CanaryObservations(
        step_index=0,
        elapsed_s=elapsed_s,
        step_elapsed_s=elapsed_s,
        assignments=(StepAssignment(weight, n, n),),
        metrics={
            "ttft_s": SampleObservations(ttft(1.0), ttft(ttft_scale)),
            "error_rate": CountObservations(
                rng.binomial(per, 0.02, intervals),
                [per] * intervals,
                rng.binomial(per, error_rate, intervals),
                [per] * intervals,
            ),
            "judge_score": SampleObservations(judge(0.0), judge(judge_shift)),
        },
    )


def _decide(obs: CanaryObservations, policy: RolloutPolicy) -> Decision:
    return decide(build_evidence(obs, policy), policy)


def _case25(name: str) -> CanaryObservations:
    data = json.loads((CASES / "25_canary_no_data.json").read_text())
    assert data["direction"] == "increase_is_bad"
    sc = data["scenarios"][name]
    counts = CountObservations.from_rates(
        sc["baseline"], sc["baseline_requests"], sc["canary"], sc["canary_requests"]
    )
    n_base, n_cand = int(sum(sc["baseline_requests"])), int(sum(sc["canary_requests"]))
    # Ten one-minute intervals at 20 % canary weight (30 of 150 requests per interval).
    return CanaryObservations(
        0, 600.0, 600.0, (StepAssignment(20.0, n_base, n_cand),), {"error_rate": counts}
    )


CASE_POLICY = RolloutPolicy(
    "case25",
    "base",
    "cand",
    min_step_duration_s=300.0,
    max_duration_s=3600.0,
    metrics=(MetricPolicy("error_rate", MetricKind.RARE_EVENT, INC, 0.5, relative=True),),
)


def test_case25_a_canary_errors_against_error_free_baseline_fails() -> None:
    obs = _case25("A_baseline_no_errors_canary_errors")
    evidence = build_evidence(obs, CASE_POLICY)
    decision = decide(evidence, CASE_POLICY)
    assert decision.action is Action.ROLLBACK  # "FAIL, do not promote"
    (metric,) = evidence.metrics
    assert metric.status == "fail" and metric.baseline_value == 0.0
    assert metric.candidate_value == pytest.approx(0.04, abs=0.005)  # rates rounded to counts
    assert metric.mann_whitney_pvalue == pytest.approx(0.003, abs=0.0005)
    assert evidence.kayenta_score == 0.0
    assert "error_rate" in decision.reasons[0]


@pytest.mark.parametrize("name", ["B_canary_no_traffic", "C_both_empty"])
def test_case25_no_data_is_inconclusive_never_promote(name: str) -> None:
    decision = _decide(_case25(name), CASE_POLICY)
    assert decision.action is Action.INCONCLUSIVE
    assert any("insufficient canary data" in r for r in decision.reasons)
    assert decision.evidence.metrics[0].status == "no_data"


def test_degrading_candidate_rolls_back() -> None:
    rng = np.random.default_rng(1)
    policy = _policy()
    decision = _decide(_observations(rng, 3000, ttft_scale=1.5, judge_shift=-0.6), policy)
    assert decision.action is Action.ROLLBACK
    failing = {m.name for m in decision.evidence.metrics if m.status == "fail"}
    assert failing == {"ttft_s", "judge_score"}
    assert all(
        m.harm is not None and m.harm.e_value >= 60
        for m in decision.evidence.metrics
        if m.status == "fail"
    )


def test_equal_candidate_with_enough_samples_promotes() -> None:
    rng = np.random.default_rng(2)
    policy = _policy()
    decision = _decide(_observations(rng, 40000), policy)
    assert decision.action is Action.PROMOTE
    assert {m.status for m in decision.evidence.metrics} == {"pass"}
    assert decision.evidence.kayenta_score == 100.0
    assert decision.evidence.threshold == pytest.approx(3 / 0.05)


def test_equal_candidate_too_early_holds_then_time_limit_is_inconclusive() -> None:
    rng = np.random.default_rng(3)
    policy = _policy()
    early = _decide(_observations(rng, 150, elapsed_s=120.0), policy)
    assert early.action is Action.HOLD
    assert any("below minimum" in r for r in early.reasons)
    late = _decide(_observations(rng, 300, elapsed_s=3600.0), policy)
    assert late.action is Action.INCONCLUSIVE
    assert late.reasons[0].startswith("time limit")


def test_no_candidate_data_holds_before_minimum_time() -> None:
    policy = _policy()
    obs = CanaryObservations(0, 60.0, 60.0, (StepAssignment(5.0, 500, 0),), {})
    decision = _decide(obs, policy)
    assert decision.action is Action.HOLD
    assert {m.status for m in decision.evidence.metrics} == {"no_data"}


def test_sample_ratio_mismatch_rolls_back_before_metrics() -> None:
    rng = np.random.default_rng(4)
    policy = _policy()
    obs = _observations(rng, 2000)
    broken = CanaryObservations(0, 1200.0, 1200.0, (StepAssignment(50.0, 2000, 1500),), obs.metrics)
    decision = _decide(broken, policy)
    assert decision.action is Action.ROLLBACK
    assert decision.reasons[0].startswith("sample ratio mismatch")
    assert decision.evidence.srm_report is not None and decision.evidence.srm_report.mismatch


def test_optional_metric_without_data_does_not_block_promotion() -> None:
    rng = np.random.default_rng(5)
    extra = MetricPolicy("thumbs_down_rate", MetricKind.PROPORTION, INC, 0.03, required=False)
    policy = _policy(metrics=(*_policy().metrics, extra))
    decision = _decide(_observations(rng, 40000), policy)
    assert decision.action is Action.PROMOTE
    assert decision.evidence.metrics[-1].status == "no_data"


def test_next_weights_transitions() -> None:
    policy = _policy()
    rng = np.random.default_rng(6)
    evidence = build_evidence(_observations(rng, 300), policy)
    state = initial_state(policy)
    assert (state.candidate_weight_pct, state.baseline_weight_pct) == (5.0, 95.0)

    def step(s: RolloutState, action: Action) -> RolloutState:
        return next_weights(policy, s, Decision(action, (), evidence))

    assert step(state, Action.HOLD) == state
    s1 = step(state, Action.PROMOTE)
    assert (s1.step_index, s1.candidate_weight_pct, s1.status) == (1, 25.0, "running")
    s3 = step(step(s1, Action.PROMOTE), Action.PROMOTE)
    assert (s3.candidate_weight_pct, s3.baseline_weight_pct, s3.status) == (100.0, 0.0, "completed")
    assert step(s3, Action.ROLLBACK) == s3  # a finished rollout never changes
    rolled = step(s1, Action.ROLLBACK)
    assert (rolled.candidate_weight_pct, rolled.baseline_weight_pct) == (0.0, 100.0)
    assert rolled.status == "rolled_back"
    paused = step(s1, Action.INCONCLUSIVE)
    assert paused.status == "paused" and paused.candidate_weight_pct == 25.0


def test_policy_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="steps_pct"):
        _policy(steps_pct=(50.0, 25.0, 100.0))
    with pytest.raises(ValueError, match="relative"):
        MetricPolicy("error_rate", MetricKind.RARE_EVENT, INC, 0.01)
    with pytest.raises(ValueError, match="tau"):
        MetricPolicy("ttft_s", MetricKind.MEAN, INC, 0.0)
    with pytest.raises(ValueError, match="candidate_variant"):
        _policy(candidate_variant="base")
    assert {m.name for m in default_metrics()} >= {"ttft_s", "tpot_s", "error_rate", "judge_score"}


def test_observations_of_the_wrong_kind_raise() -> None:
    policy = _policy()
    obs = CanaryObservations(
        0,
        700.0,
        700.0,
        (StepAssignment(50.0, 10, 10),),
        {"ttft_s": CountObservations([0], [10], [0], [10])},
    )
    with pytest.raises(ValueError, match="ttft_s"):
        build_evidence(obs, policy)


def test_empty_candidate_is_early_not_inconclusive_at_low_traffic() -> None:
    """10 % weight, 20 baseline requests after the minimum time: ~2 candidate requests were
    expected, so zero is not yet a finding (hold); with 500 baseline requests it is."""
    policy = _policy()
    few = CanaryObservations(0, 700.0, 700.0, (StepAssignment(5.0, 20, 0),), {})
    assert _decide(few, policy).action is Action.HOLD
    many = CanaryObservations(0, 700.0, 700.0, (StepAssignment(5.0, 500, 0),), {})
    assert _decide(many, policy).action is Action.INCONCLUSIVE


def test_calls_in_flight_hold_instead_of_pausing() -> None:
    """Issue 17: a slow engine finishes no call of the new step for tens of seconds; without
    the gateway's counts the rollout waits ``no_traffic_pause_s`` before pausing."""
    policy = _policy(min_step_duration_s=30.0, no_traffic_pause_s=300.0)
    early = CanaryObservations(0, 37.0, 37.0, (StepAssignment(5.0, 500, 0),), {})
    decision = _decide(early, policy)
    assert decision.action is Action.HOLD
    assert any("in flight" in r for r in decision.reasons)
    late = CanaryObservations(0, 400.0, 400.0, (StepAssignment(5.0, 500, 0),), {})
    assert _decide(late, policy).action is Action.INCONCLUSIVE


def test_gateway_routing_counts_decide_whether_traffic_is_missing() -> None:
    policy = _policy(min_step_duration_s=30.0, no_traffic_pause_s=3000.0)
    routed = StepAssignment(5.0, 500, 25)  # the gateway sent 25 calls to the candidate
    in_flight = CanaryObservations(0, 400.0, 400.0, (StepAssignment(5.0, 500, 0),), {}, routed)
    assert _decide(in_flight, policy).action is Action.HOLD
    dropped = StepAssignment(5.0, 500, 0)  # the gateway routed nothing to the candidate
    missing = CanaryObservations(0, 60.0, 60.0, (StepAssignment(5.0, 500, 0),), {}, dropped)
    assert _decide(missing, policy).action is Action.INCONCLUSIVE


def test_proportion_without_an_interval_holding_both_arms_is_no_data() -> None:
    """Strata need both arms: disjoint intervals give no contrast -- no data, never an error."""
    metric = MetricPolicy("length_finish_rate", MetricKind.PROPORTION, INC, 0.02)
    policy = _policy(metrics=(metric,))
    obs = CanaryObservations(
        0,
        60.0,
        60.0,
        (StepAssignment(50.0, 10, 10),),
        {"length_finish_rate": CountObservations([1, 0], [10, 0], [0, 2], [0, 10])},
    )
    (ev,) = build_evidence(obs, policy).metrics
    assert ev.status == "no_data" and "both arms" in ev.reason


def test_judged_metric_waits_for_a_kish_effective_sample() -> None:
    """Ten judged baseline calls with weights 1 and 20 are ~5 effective values: no evidence yet
    (a regression was promoted at such a look); once each arm has 30 effective values it counts."""
    rng = np.random.default_rng(12)
    policy = _policy(
        metrics=(MetricPolicy("judge_score", MetricKind.MEAN, DEC, 0.2, role="quality"),)
    )

    def obs(n_flagged: int, n_sampled: int) -> CanaryObservations:
        base = np.concatenate([np.full(n_flagged, 2.0), rng.normal(4, 0.8, n_sampled)])
        pi_a = np.concatenate([np.ones(n_flagged), np.full(n_sampled, 0.05)])
        cand = rng.normal(4, 0.8, 60)
        sample = SampleObservations(
            base, cand, baseline_inclusion=pi_a, candidate_inclusion=np.full(60, 0.5)
        )
        return CanaryObservations(
            0, 1200.0, 1200.0, (StepAssignment(50.0, 500, 500),), {"judge_score": sample}
        )

    small = build_evidence(obs(5, 5), policy).metrics[0]
    assert small.status == "no_data"
    assert "Kish n_eff baseline=" in small.reason
    assert build_evidence(obs(5, 60), policy).metrics[0].status != "no_data"
