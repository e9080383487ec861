"""Weighted rendezvous routing: stickiness, split accuracy, minimal disruption, validation."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from serving.routing import choose_variant, random_variant, sticky_variant, unit_hash

WEIGHTS = {"base": 0.7, "candidate-good": 0.2, "candidate-bad": 0.1}


def test_a_users_arm_is_stable_across_1000_requests() -> None:
    rng = np.random.default_rng(1)
    for user in ("alice", "bob", "user-0042"):
        arms = {
            choose_variant(WEIGHTS, user_id=user, session_id=f"s{i}", rng=rng, salt="bot").variant
            for i in range(1000)
        }
        assert len(arms) == 1


def test_split_matches_weights_within_3_percent() -> None:
    n = 20_000
    counts = Counter(sticky_variant(WEIGHTS, f"user-{i}", salt="bot") for i in range(n))
    for name, w in WEIGHTS.items():
        assert abs(counts[name] / n - w) < 0.03, (name, counts[name] / n)


def test_unnormalised_weights_give_the_same_routing() -> None:
    scaled = {k: v * 7 for k, v in WEIGHTS.items()}
    for i in range(500):
        assert sticky_variant(WEIGHTS, f"u{i}") == sticky_variant(scaled, f"u{i}")


def test_raising_the_candidate_moves_users_only_towards_it() -> None:
    before = {"base": 0.9, "cand": 0.1}
    after = {"base": 0.8, "cand": 0.2}
    moved_to, moved_from = 0, 0
    n = 10_000
    for i in range(n):
        a, b = sticky_variant(before, f"u{i}"), sticky_variant(after, f"u{i}")
        moved_to += a == "base" and b == "cand"
        moved_from += a == "cand" and b == "base"
    assert moved_from == 0
    # P(move) = 0.2 - 0.1 = 0.1 of users (minimal disruption)
    assert abs(moved_to / n - 0.1) < 0.02


def test_zero_weight_never_wins_and_salt_separates_rollouts() -> None:
    w = {"base": 1.0, "off": 0.0}
    assert {sticky_variant(w, f"u{i}") for i in range(2000)} == {"base"}
    half = {"a": 0.5, "b": 0.5}
    same = sum(
        sticky_variant(half, f"u{i}", salt="r1") == sticky_variant(half, f"u{i}", salt="r2")
        for i in range(4000)
    )
    assert 0.4 < same / 4000 < 0.6  # independent splits per rollout


def test_requests_without_user_or_session_are_drawn_by_weight() -> None:
    rng = np.random.default_rng(3)
    decisions = [
        choose_variant(WEIGHTS, user_id=None, session_id=None, rng=rng) for _ in range(20_000)
    ]
    assert not any(d.sticky for d in decisions)
    counts = Counter(d.variant for d in decisions)
    for name, w in WEIGHTS.items():
        assert abs(counts[name] / 20_000 - w) < 0.03
    session = choose_variant(WEIGHTS, user_id=None, session_id="sess-1", rng=rng)
    assert session.sticky and session.key == "sess-1"


def test_unit_hash_is_in_the_open_unit_interval_and_uniform() -> None:
    xs = np.array([unit_hash("k", str(i)) for i in range(20_000)])
    assert ((xs > 0) & (xs < 1)).all()
    assert abs(xs.mean() - 0.5) < 0.01


@pytest.mark.parametrize(
    "weights",
    [{}, {"a": -0.1, "b": 1.0}, {"a": 0.0}, {"a": float("nan")}, {"": 1.0}],
)
def test_invalid_weights_raise_value_error_naming_the_parameter(weights: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="weights"):
        sticky_variant(weights, "u")
    with pytest.raises(ValueError, match="weights"):
        random_variant(weights, np.random.default_rng(0))
