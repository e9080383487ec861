"""Workload planning for ``driftline load``: prompts, users, sessions, Poisson arrivals, mix shift.

Pure functions (no I/O besides reading the prompt file); :mod:`serving.load` executes the plan.
Arrivals: a homogeneous Poisson process of rate λ has i.i.d. Exp(λ) inter-arrival times
(Ross, "Introduction to Probability Models", §5.3).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

DEFAULT_PROMPTS = "support_prompts.jsonl"


@dataclass(frozen=True)
class Prompt:
    """One prompt of a prompt set. ``category`` is ``uncategorized`` when the file has none."""

    id: str
    category: str
    text: str


@dataclass(frozen=True)
class PlannedRequest:
    """One request of a load plan.

    Attributes:
        index: position in the plan (0-based).
        at_s: send time in seconds after the start (0 for closed-loop plans).
        user_id, session_id: simulated end user and conversation.
        prompt: what to send.
        phase: 0 before the category-mix switch, 1 after.
    """

    index: int
    at_s: float
    user_id: str
    session_id: str
    prompt: Prompt
    phase: int


def load_prompts(path: Path | None = None, *, category_field: str = "category") -> list[Prompt]:
    """Read a JSONL prompt set; default: driftline's own support prompts (package data).

    Each line needs ``prompt`` (or ``instruction``); ``id`` and ``category_field`` are optional.

    Raises:
        ValueError: a line is not a JSON object with a non-empty prompt, or the file is empty.
    """
    if path is None:
        text = resources.files("serving.prompts").joinpath(DEFAULT_PROMPTS).read_text()
    else:
        text = path.read_text()
    out: list[Prompt] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        body = row.get("prompt") or row.get("instruction") if isinstance(row, dict) else None
        if not isinstance(body, str) or not body.strip():
            raise ValueError(f"path: line {n} has no non-empty 'prompt' or 'instruction'")
        cat = row.get(category_field)
        out.append(
            Prompt(
                id=str(row.get("id", n)),
                category="uncategorized" if cat in (None, "") else str(cat),
                text=body,
            )
        )
    if not out:
        raise ValueError(f"path: {path or DEFAULT_PROMPTS} holds no prompts")
    return out


def parse_mix(spec: str | None) -> dict[str, float] | None:
    """``"billing=2,technical=1"`` -> ``{"billing": 2.0, "technical": 1.0}``; None/'' -> None.

    Raises:
        ValueError: malformed item or a negative weight.
    """
    if not spec:
        return None
    mix: dict[str, float] = {}
    for item in spec.split(","):
        name, sep, weight = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"mix: expected category=weight, got {item!r}")
        w = float(weight)
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"mix: weight of {name!r} must be >= 0")
        mix[name.strip()] = w
    return mix


def _category_sampler(
    by_cat: Mapping[str, Sequence[Prompt]], mix: Mapping[str, float] | None
) -> tuple[list[str], np.ndarray]:
    if mix is None:  # proportional to the prompt set itself
        cats = sorted(by_cat)
        w = np.array([len(by_cat[c]) for c in cats], dtype=float)
    else:
        unknown = sorted(set(mix) - set(by_cat))
        if unknown:
            raise ValueError(f"mix: unknown categories {unknown}; known: {sorted(by_cat)}")
        cats = sorted(c for c in mix if mix[c] > 0)
        if not cats:
            raise ValueError("mix: at least one weight must be > 0")
        w = np.array([mix[c] for c in cats], dtype=float)
    return cats, w / w.sum()


def plan_load(
    prompts: Sequence[Prompt],
    *,
    n_requests: int,
    rng: np.random.Generator,
    rate_per_s: float | None = None,
    n_users: int = 50,
    mean_session_turns: float = 4.0,
    mix: Mapping[str, float] | None = None,
    shift_mix: Mapping[str, float] | None = None,
    shift_at: float = 0.5,
) -> list[PlannedRequest]:
    """Plan ``n_requests`` requests.

    Args:
        prompts: the prompt set.
        n_requests: number of requests (>= 1).
        rng: all randomness (users, sessions, prompts, arrivals).
        rate_per_s: Poisson arrival rate (requests/second); None = closed loop (all at 0 s,
            the executor's concurrency limit paces them).
        n_users: simulated users, chosen uniformly per request.
        mean_session_turns: a user's next request starts a new session with probability
            ``1 / mean_session_turns`` (geometric session lengths with this mean).
        mix: category -> weight before the switch (None: proportional to the prompt set).
        shift_mix: category -> weight from request ``floor(shift_at * n_requests)`` on
            (None: no switch) — injects a topic shift for drift demos.
        shift_at: fraction of the plan after which ``shift_mix`` applies, in (0, 1).

    Raises:
        ValueError: a parameter out of range or a mix naming unknown categories.
    """
    if n_requests < 1:
        raise ValueError(f"n_requests: must be >= 1, got {n_requests}")
    if rate_per_s is not None and not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate_per_s: must be > 0, got {rate_per_s}")
    if n_users < 1:
        raise ValueError(f"n_users: must be >= 1, got {n_users}")
    if mean_session_turns < 1:
        raise ValueError(f"mean_session_turns: must be >= 1, got {mean_session_turns}")
    if not 0 < shift_at < 1:
        raise ValueError(f"shift_at: must be in (0, 1), got {shift_at}")
    if not prompts:
        raise ValueError("prompts: the prompt set is empty")
    by_cat: dict[str, list[Prompt]] = {}
    for p in prompts:
        by_cat.setdefault(p.category, []).append(p)
    phases = [_category_sampler(by_cat, mix)]
    if shift_mix is not None:
        phases.append(_category_sampler(by_cat, shift_mix))
    switch = math.floor(shift_at * n_requests) if shift_mix is not None else n_requests
    if rate_per_s is None:
        times = np.zeros(n_requests)
    else:
        times = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n_requests))
    session_no = [0] * n_users
    plan: list[PlannedRequest] = []
    for i in range(n_requests):
        phase = 1 if i >= switch else 0
        cats, probs = phases[phase]
        cat = cats[int(rng.choice(len(cats), p=probs))]
        prompt = by_cat[cat][int(rng.integers(len(by_cat[cat])))]
        u = int(rng.integers(n_users))
        if rng.random() < 1.0 / mean_session_turns:
            session_no[u] += 1
        plan.append(
            PlannedRequest(
                index=i,
                at_s=float(times[i]),
                user_id=f"user-{u:04d}",
                session_id=f"user-{u:04d}-s{session_no[u]}",
                prompt=prompt,
                phase=phase,
            )
        )
    return plan
