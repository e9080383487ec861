"""Missing data at each state of the alert machine (Prometheus semantics).

A gap is either an unknown observation (a sample whose value is None: fewer than
``min_samples`` calls in the window) or an evaluation in which the label set is absent.
Pending + gap -> inactive (never notified); firing + gap -> still firing; inactive/resolved +
gap -> unchanged; time alone neither fires nor resolves.
"""

from __future__ import annotations

from alerts.evaluate import apply_series
from alerts.rules import Sample, Series, ThresholdRule, breach_of
from alerts.state import AlertState, AlertStatus, advance, new_alert, step

T0 = 1_800_000_000.0
RULE = ThresholdRule(
    name="ttft_p99_high",
    stat="ttft_s",
    quantile=0.99,
    op=">",
    threshold=2.0,
    resolve_threshold=1.5,
    for_s=300,
    resolve_for_s=120,
    receivers=("oncall",),
)


def _drive(values: list[float | None], dt: float = 60) -> list[AlertState]:
    """Step one alert through ``values`` (one per minute); every intermediate state."""
    a = new_alert(RULE.name, {})
    out = []
    for i, v in enumerate(values):
        a = step(
            a,
            breach_of(RULE, v, firing=a.is_firing),
            T0 + i * dt,
            for_s=RULE.for_s,
            resolve_for_s=RULE.resolve_for_s,
            value=v,
        )
        out.append(a)
    return out


def test_gap_while_inactive_changes_nothing() -> None:
    states = _drive([None, None, 1.0, None])
    assert [s.status for s in states] == [AlertStatus.INACTIVE] * 4
    assert states[-1].active_since is None and states[-1].fired_at is None


def test_gap_while_pending_returns_to_inactive_and_never_fires() -> None:
    # breaching for 240 s, then a gap at 300 s (for_s elapsed): the old machine fired here
    states = _drive([3, 3, 3, 3, 3, None])
    assert states[4].status is AlertStatus.PENDING
    assert states[5].status is AlertStatus.INACTIVE
    assert states[5].active_since is None and states[5].fired_at is None
    # the breach after the gap starts a new pending episode: for_s counts from there
    again = _drive([3, 3, 3, 3, 3, None, 3, 3, 3, 3, 3])
    assert again[-1].status is AlertStatus.PENDING and again[-1].active_since == T0 + 6 * 60
    assert _drive([3, 3, 3, 3, 3, None, *[3] * 6])[-1].status is AlertStatus.FIRING


def test_gap_while_firing_keeps_firing_until_data_says_otherwise() -> None:
    states = _drive([3] * 6 + [None] * 30)
    assert states[5].status is AlertStatus.FIRING
    assert all(s.status is AlertStatus.FIRING for s in states[5:])
    assert states[-1].fired_at == T0 + 300 and states[-1].resolved_at is None
    # data after the gap decides: clear held resolve_for_s (120 s) resolves
    after = _drive([3] * 6 + [None] * 5 + [1.0, 1.0, 1.0])
    assert after[-1].status is AlertStatus.RESOLVED
    assert after[-1].resolved_at == T0 + 13 * 60


def test_gap_during_resolve_countdown_neither_resolves_nor_resets() -> None:
    # clear at 360 s, then gaps past 480 s: time alone does not resolve
    states = _drive([3] * 6 + [1.0] + [None] * 5)
    assert states[-1].status is AlertStatus.FIRING and states[-1].clear_since == T0 + 360
    # the next clear observation completes the countdown started by data
    done = _drive([3] * 6 + [1.0] + [None] * 5 + [1.0])
    assert done[-1].status is AlertStatus.RESOLVED and done[-1].resolved_at == T0 + 12 * 60
    # a breach after the gap cancels it
    back = _drive([3] * 6 + [1.0] + [None] * 5 + [2.5, 1.0])
    assert back[-1].status is AlertStatus.FIRING and back[-1].clear_since == T0 + 13 * 60


def test_gap_after_resolved_changes_nothing() -> None:
    states = _drive([3] * 6 + [1.0, 1.0, 1.0] + [None] * 4)
    assert states[8].status is AlertStatus.RESOLVED
    assert all(s.status is AlertStatus.RESOLVED for s in states[8:])
    assert states[-1].resolved_at == states[8].resolved_at


def test_advance_is_absence_not_maturation() -> None:
    pending = _drive([3, 3])[-1]
    assert advance(pending, T0 + 3600, for_s=300, resolve_for_s=120).status is (
        AlertStatus.INACTIVE
    )
    firing = _drive([3] * 6 + [1.0])[-1]
    later = advance(firing, T0 + 3600, for_s=300, resolve_for_s=120)
    assert later.status is AlertStatus.FIRING and later.last_evaluated_at == T0 + 3600


def _series(model: str, values: list[tuple[float, float | None]]) -> Series:
    return Series(labels={"model": model}, samples=tuple(Sample(at, v) for at, v in values))


def test_apply_series_absent_label_set_drops_pending_keeps_firing() -> None:
    alerts: dict[str, AlertState] = {}
    # model a breaches long enough to fire, model b only to pend
    apply_series(
        RULE,
        alerts,
        [
            _series("a", [(T0 + i * 60, 3.0) for i in range(6)]),
            _series("b", [(T0 + 240 + i * 60, 3.0) for i in range(2)]),
        ],
        T0 + 300,
    )
    by_model = {a.labels["model"]: a for a in alerts.values()}
    assert by_model["a"].status is AlertStatus.FIRING
    assert by_model["b"].status is AlertStatus.PENDING
    # next evaluations: neither label set has data (traffic stopped), for 10 minutes
    for k in range(1, 11):
        apply_series(RULE, alerts, [], T0 + 300 + k * 60)
    by_model = {a.labels["model"]: a for a in alerts.values()}
    assert by_model["a"].status is AlertStatus.FIRING  # no resolve on missing data
    assert by_model["b"].status is AlertStatus.INACTIVE  # pending dropped, never fired
    assert by_model["b"].fired_at is None
    # an unknown sample (too few calls) for a: still firing; a clear one then resolves in time
    apply_series(RULE, alerts, [_series("a", [(T0 + 960, None)])], T0 + 960)
    apply_series(RULE, alerts, [_series("a", [(T0 + 1020, 1.0)])], T0 + 1020)
    apply_series(RULE, alerts, [_series("a", [(T0 + 1140, 1.0)])], T0 + 1140)
    by_model = {a.labels["model"]: a for a in alerts.values()}
    assert by_model["a"].status is AlertStatus.RESOLVED
    assert by_model["a"].resolved_at == T0 + 1140
