"""Prompt sets, load plans (Poisson arrivals, sessions, topic shift) and the load runner."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI, Request

from serving.asgi_thread import ServerThread
from serving.load import LoadOptions, run_load, simulated_feedback_kind, text_quality
from serving.workload import load_prompts, parse_mix, plan_load
from tests.serving.conftest import RunningGateway, ids
from tests.support.fixtures import dolly_lines


def test_shipped_prompt_set_has_hundreds_of_prompts_in_several_categories() -> None:
    prompts = load_prompts()
    cats = Counter(p.category for p in prompts)
    assert len(prompts) >= 250 and len(cats) >= 5 and min(cats.values()) >= 20
    assert len({p.id for p in prompts}) == len(prompts)
    assert len({p.text for p in prompts}) == len(prompts)


def test_dolly_prompts_load_without_categories(tmp_path: Path) -> None:
    dolly = tmp_path / "dolly15k_prompts.jsonl"  # the plain JSONL a user would pass
    dolly.write_text("".join(dolly_lines()), encoding="utf-8")
    prompts = load_prompts(dolly)
    assert len(prompts) > 10_000 and {p.category for p in prompts} == {"uncategorized"}
    by_context = load_prompts(dolly, category_field="has_context")
    assert {p.category for p in by_context} == {"True", "False"}


def test_poisson_arrivals_have_the_target_rate() -> None:
    plan = plan_load(load_prompts(), n_requests=5000, rate_per_s=20.0, rng=np.random.default_rng(0))
    gaps = np.diff([0.0] + [r.at_s for r in plan])
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.05)
    assert gaps.std() == pytest.approx(1 / 20, rel=0.08)  # exponential: sd == mean
    closed = plan_load(load_prompts(), n_requests=10, rng=np.random.default_rng(0))
    assert all(r.at_s == 0 for r in closed)


def test_category_mix_switches_half_way() -> None:
    plan = plan_load(
        load_prompts(),
        n_requests=1000,
        rng=np.random.default_rng(1),
        mix=parse_mix("billing=1,shipping=1"),
        shift_mix=parse_mix("complaint=1"),
    )
    first, second = plan[:500], plan[500:]
    assert {r.prompt.category for r in first} == {"billing", "shipping"}
    assert {r.prompt.category for r in second} == {"complaint"}
    assert {r.phase for r in first} == {0} and {r.phase for r in second} == {1}


def test_users_and_sessions() -> None:
    plan = plan_load(
        load_prompts(),
        n_requests=4000,
        n_users=20,
        mean_session_turns=4,
        rng=np.random.default_rng(2),
    )
    assert len({r.user_id for r in plan}) == 20
    sessions = Counter(r.session_id for r in plan)
    assert np.mean(list(sessions.values())) == pytest.approx(4, rel=0.25)
    assert all(r.session_id.startswith(r.user_id) for r in plan)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"n_requests": 0}, "n_requests"),
        ({"rate_per_s": -1.0}, "rate_per_s"),
        ({"n_users": 0}, "n_users"),
        ({"shift_at": 1.0}, "shift_at"),
        ({"mix": {"nope": 1.0}}, "mix"),
        ({"mean_session_turns": 0.5}, "mean_session_turns"),
    ],
)
def test_plan_validation(kwargs: dict[str, Any], needle: str) -> None:
    args: dict[str, Any] = {"n_requests": 10, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ValueError, match=needle):
        plan_load(load_prompts(), **args)
    with pytest.raises(ValueError, match="mix"):
        parse_mix("billing")


def test_simulated_feedback_heuristic() -> None:
    assert text_quality("") == 0.0
    assert text_quality("You can reset the password from the account page.") > 0.8
    assert text_quality("the the the the the the") < 0.2
    rng = np.random.default_rng(0)
    kinds = Counter(simulated_feedback_kind("- - # \n\n the the", rng) for _ in range(200))
    assert kinds["thumbs_down"] > 150
    fine = Counter(
        simulated_feedback_kind("You can reset the password from the account page.", rng)
        for _ in range(400)
    )
    # a fine answer is still down-voted now and then (about 3 %), never by most users
    assert 2 <= fine["thumbs_down"] <= 30


class FeedbackSink:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/api/v1/feedback")
        async def feedback(request: Request) -> dict[str, str]:
            self.items.append(await request.json())
            return {"status": "accepted"}

        self.app = app


@pytest.fixture
def sink() -> Iterator[tuple[FeedbackSink, str]]:
    s = FeedbackSink()
    with ServerThread(s.app) as url:
        yield s, url


def test_run_load_through_the_gateway_with_simulated_feedback(
    make_gateway: Callable[..., RunningGateway], sink: tuple[FeedbackSink, str]
) -> None:
    feedback, url = sink
    gw = make_gateway()
    rng = np.random.default_rng(5)
    plan = plan_load(load_prompts(), n_requests=60, rate_per_s=200.0, n_users=10, rng=rng)
    done: list[int] = []
    report = asyncio.run(
        run_load(
            plan,
            LoadOptions(
                gateway_url=gw.url,
                model="bot",
                concurrency=4,
                max_tokens=8,
                collector_url=url,
                feedback_rate=1.0,
            ),
            rng=rng,
            on_done=lambda _r, status: done.append(status),
        )
    )
    assert report.sent == 60 and report.ok == 60 and done == [200] * 60
    assert sum(report.by_variant.values()) == 60 and set(report.by_variant) <= {"base", "lora-a"}
    assert report.feedback_sent == 60 and report.feedback_failed == 0
    span_traces = {ids(s)[0] for s in gw.spans.get_finished_spans()}
    for item in feedback.items:
        assert item["metadata"]["source"] == "simulated"
        assert item["kind"] in ("thumbs_up", "thumbs_down")
        assert item["trace_id"] in span_traces and item["user_id"].startswith("user-")
        assert item["feedback_id"] and item["timestamp"].endswith("+00:00")
    # per-user stickiness seen from the client side
    seen: dict[str, set[str]] = {}
    for s in gw.spans.get_finished_spans():
        a = s.attributes or {}
        seen.setdefault(str(a["user.id"]), set()).add(str(a["driftline.variant"]))
    assert all(len(v) == 1 for v in seen.values())


def test_feedback_failures_are_counted_not_fatal(
    make_gateway: Callable[..., RunningGateway],
) -> None:
    gw = make_gateway()
    rng = np.random.default_rng(6)
    plan = plan_load(load_prompts(), n_requests=5, rng=rng)
    report = asyncio.run(
        run_load(
            plan,
            LoadOptions(
                gateway_url=gw.url,
                model="bot",
                stream=False,
                max_tokens=4,
                collector_url="http://127.0.0.1:9",
                feedback_rate=1.0,
            ),
            rng=rng,
        )
    )
    assert report.ok == 5 and report.feedback_failed == 5 and report.feedback_sent == 0


def test_simulated_users_dislike_answers_that_do_not_open_like_a_sentence() -> None:
    """candidate-bad's word salad ("come out me me myself ...") is mostly word-like, so the
    fluency product alone barely separates it from real answers; a sentence start does."""
    good = "You can reset the password from the account page."
    salad = "come out me me myself new Ie I. oldest of the bare him all le Min"
    assert text_quality(good) > 3 * text_quality(salad)
    assert text_quality("1. Open the settings page") > 0.6
