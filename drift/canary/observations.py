"""What the canary engine observes at one look: per-arm values or counts, by stratum."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


def to_float_array(values: ArrayLike | None) -> NDArray[np.float64]:
    """Flatten to float64, ``None`` -> NaN (unknown, never 0); ``None`` input -> empty."""
    if values is None:
        return np.empty(0)
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        return values.astype(np.float64, copy=False).ravel()
    arr = np.array([math.nan if v is None else v for v in np.ravel(np.asarray(values, object))])
    return arr.astype(np.float64)


@dataclass(frozen=True)
class SampleObservations:
    """MEAN: per-request values per arm; PAIRWISE: outcomes in ``candidate`` (baseline unused).
    ``None``/NaN = unknown, dropped.

    ``*_strata``: integer stratum per value (step, or time block inside a step; None = one
    stratum); contrasts are taken inside strata (``drift.canary.stratified``). ``*_inclusion``:
    each value's probability of having been observed (judge sampling's pi; None = 1), giving
    Hajek means.
    """

    baseline: ArrayLike
    candidate: ArrayLike
    baseline_strata: ArrayLike | None = None
    candidate_strata: ArrayLike | None = None
    baseline_inclusion: ArrayLike | None = None
    candidate_inclusion: ArrayLike | None = None


@dataclass(frozen=True)
class CountObservations:
    """PROPORTION / RARE_EVENT: per-interval event and trial (request) counts, shape (m,).

    Each interval is a stratum: contrasts are taken inside it, so intervals must not span a
    change of the traffic share (one step, or a time block inside a step)."""

    baseline_events: ArrayLike
    baseline_trials: ArrayLike
    candidate_events: ArrayLike
    candidate_trials: ArrayLike

    @classmethod
    def from_rates(
        cls,
        baseline_rates: ArrayLike,
        baseline_requests: ArrayLike,
        candidate_rates: ArrayLike,
        candidate_requests: ArrayLike,
    ) -> CountObservations:
        """From per-interval rates: a null rate with requests > 0 is 0 events (the interval saw
        no event), with 0 requests it is no data; events = round(rate * requests)."""
        out: list[NDArray[np.float64]] = []
        for rates, requests in (
            (baseline_rates, baseline_requests),
            (candidate_rates, candidate_requests),
        ):
            r, n = to_float_array(rates), to_float_array(requests)
            if r.shape != n.shape:
                raise ValueError("rates and requests must have the same length")
            out += [np.rint(np.where(np.isnan(r), 0.0, r) * n), n]
        return cls(out[0], out[1], out[2], out[3])


@dataclass(frozen=True)
class RatioObservations:
    """RATIO: per randomisation unit numerator and denominator, per arm, shape (n,)."""

    baseline_numerator: ArrayLike
    baseline_denominator: ArrayLike
    candidate_numerator: ArrayLike
    candidate_denominator: ArrayLike


Observations = SampleObservations | CountObservations | RatioObservations


@dataclass(frozen=True)
class StepAssignment:
    """Requests routed to each arm during one step at ``candidate_weight_pct`` (SRM input)."""

    candidate_weight_pct: float
    baseline_count: int
    candidate_count: int


@dataclass(frozen=True)
class CanaryObservations:
    """Everything the engine needs at one look. Metric observations are cumulative over the
    rollout; ``assignments`` has one entry per step so far, the last is the current step."""

    step_index: int
    elapsed_s: float
    step_elapsed_s: float
    assignments: tuple[StepAssignment, ...]
    metrics: Mapping[str, Observations]
    #: requests the gateway routed to each arm in the current step (its own counts), if known
    step_routed: StepAssignment | None = None
