"""The judge worker: select new samples, claim them, judge them concurrently, store the results.

``run_once`` does one full round (selection, then claims until no pending sample is left or the
daily USD budget is spent); ``run_forever`` repeats it every ``interval_s``. One sample takes at
most ``sample_timeout_s`` (all retries included) and never outlives its lease: a sample whose
lease would run out before its turn comes goes back to the queue unjudged (``pending``), one
that times out is recorded as an ``unavailable`` failure (retried up to ``max_attempts``). A
crashed worker's claims return to the queue when their lease expires (``claim_samples``).
The worker receives its ``openai.AsyncOpenAI`` client from the entry point (docs/STYLE.md,
"Judges"). Database calls are synchronous SQLAlchemy and run in threads so judge requests keep
flowing meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
from dataclasses import dataclass, replace

import openai
from sqlalchemy import Engine, func, select, update

from collector.store.models.judges import JudgeResultRow, JudgeSample
from judges.claims import ClaimedSample, claim_samples, record_failure, record_result
from judges.errors import JudgeError, JudgeUnavailableError, RubricError
from judges.pairwise_worker import judge_rollout_pairs
from judges.rubrics import Rubric
from judges.runner import JudgeResult, judge_call
from judges.selection import select_new_samples, utc_day_start
from judges.settings import JudgeSettings
from judges.transport import JUDGE_RETRY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunReport:
    """Counts of one worker round: calls considered / sampled, samples judged or failed."""

    considered: int
    sampled: int
    claimed: int
    judged: int
    failed: int
    requeued: int
    pairwise: int
    budget_exhausted: bool


def default_worker_id() -> str:
    """``host:pid``: names the lease holder in ``judge_samples.lease_owner``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def spent_today_usd(engine: Engine, now: dt.datetime) -> float:
    """USD recorded for judge calls since midnight UTC (all tenants)."""
    with engine.connect() as conn:
        total = conn.execute(
            select(func.sum(JudgeResultRow.cost_usd)).where(
                JudgeResultRow.created_at >= utc_day_start(now)
            )
        ).scalar_one()
    return float(total or 0.0)


#: seconds of a lease kept free after the judge call, to store its result
STORE_MARGIN_S = 5.0


def release_claim(engine: Engine, sample_id: int, worker_id: str) -> bool:
    """Put a sample this worker holds back to ``pending`` (no attempt recorded); False when
    the claim was no longer ours."""
    with engine.begin() as conn:
        done = conn.execute(
            update(JudgeSample)
            .where(JudgeSample.id == sample_id, JudgeSample.lease_owner == worker_id)
            .values(
                status="pending",
                lease_owner=None,
                lease_expires_at=None,
                updated_at=dt.datetime.now(dt.UTC),
            )
        ).rowcount
    return bool(done)


async def _judge_one(
    client: openai.AsyncOpenAI,
    engine: Engine,
    sample: ClaimedSample,
    rubric: Rubric,
    settings: JudgeSettings,
    model: str,
    worker_id: str,
    gate: asyncio.Semaphore,
    lease_ends: float,
) -> str:
    """Judge one claimed sample; ``lease_ends`` is the claim's end on ``time.monotonic()``."""
    async with gate:
        budget_s = min(settings.sample_timeout_s, lease_ends - STORE_MARGIN_S - time.monotonic())
        if budget_s <= 0:
            # its lease would expire mid-call: back to the queue for the next round
            released = await asyncio.to_thread(release_claim, engine, sample.id, worker_id)
            return "pending" if released else "lost"
        try:
            call = _call(client, sample, rubric, settings, model)
            result = await asyncio.wait_for(call, budget_s)
        except TimeoutError:
            exc: JudgeError = JudgeUnavailableError(
                f"judging sample {sample.id} took over {budget_s:.0f} s "
                "(DRIFTLINE_JUDGE_SAMPLE_TIMEOUT_S, or the rest of its lease)"
            )
            log.warning("%s", exc)
            return await _failed(engine, sample, exc, rubric, settings, model, worker_id)
        except JudgeError as exc:
            log.warning("judging sample %s failed: %s", sample.id, exc)
            return await _failed(engine, sample, exc, rubric, settings, model, worker_id)
    stored = await asyncio.to_thread(
        record_result, engine, sample, result, settings, worker_id=worker_id
    )
    return "done" if stored else "lost"


async def _failed(
    engine: Engine,
    sample: ClaimedSample,
    exc: JudgeError,
    rubric: Rubric,
    settings: JudgeSettings,
    model: str,
    worker_id: str,
) -> str:
    return await asyncio.to_thread(
        record_failure,
        engine,
        sample,
        exc,
        rubric_version=rubric.version,
        rubric_fingerprint=rubric.fingerprint,
        judge_model=model,
        max_attempts=settings.max_attempts,
        worker_id=worker_id,
    )


async def _call(
    client: openai.AsyncOpenAI,
    sample: ClaimedSample,
    rubric: Rubric,
    settings: JudgeSettings,
    model: str,
) -> JudgeResult:
    return await judge_call(
        client,
        model=model,
        rubric=rubric,
        prompt=sample.input_text,
        answer=sample.output_text,
        price=settings.price(),
        max_tokens=settings.max_tokens,
        retry=replace(JUDGE_RETRY, request_timeout_s=settings.timeout_s),
        reasoning_max_chars=settings.reasoning_max_chars,
    )


async def judge_pending(
    client: openai.AsyncOpenAI,
    engine: Engine,
    settings: JudgeSettings,
    *,
    worker_id: str,
    concurrency: int | None = None,
) -> tuple[int, int, int, int, bool]:
    """Claim and judge pending samples until none is left: (claimed, done, failed, requeued,
    budget_exhausted). Requeued samples are not retried in the same call."""
    _, model = settings.require_endpoint()
    gate = asyncio.Semaphore(concurrency or settings.concurrency)
    rubrics: dict[str, Rubric] = {}
    claimed = done = failed = requeued = 0
    seen: set[int] = set()
    while True:
        now = dt.datetime.now(dt.UTC)
        if settings.daily_max_usd is not None:
            spent = await asyncio.to_thread(spent_today_usd, engine, now)
            if spent >= settings.daily_max_usd:
                return claimed, done, failed, requeued, True
        claimed_at = time.monotonic()
        batch = await asyncio.to_thread(
            claim_samples,
            engine,
            worker_id=worker_id,
            limit=settings.batch_size,
            lease_s=settings.lease_s,
            exclude=frozenset(seen),
        )
        if not batch:
            return claimed, done, failed, requeued, False
        claimed += len(batch)
        seen.update(s.id for s in batch)
        tasks = []
        for sample in batch:
            if sample.rubric not in rubrics:
                try:
                    rubrics[sample.rubric] = settings.rubric(sample.rubric)
                except RubricError as exc:  # e.g. its file left DRIFTLINE_JUDGE_RUBRIC_DIR
                    status = await asyncio.to_thread(
                        record_failure,
                        engine,
                        sample,
                        exc,
                        rubric_version="unknown",
                        rubric_fingerprint="unknown",
                        judge_model=model,
                        max_attempts=settings.max_attempts,
                        worker_id=worker_id,
                    )
                    failed += status == "failed"
                    continue
            tasks.append(
                _judge_one(
                    client,
                    engine,
                    sample,
                    rubrics[sample.rubric],
                    settings,
                    model,
                    worker_id,
                    gate,
                    claimed_at + settings.lease_s,
                )
            )
        for status in await asyncio.gather(*tasks):
            done += status == "done"
            failed += status == "failed"
            requeued += status == "pending"


async def run_once(
    client: openai.AsyncOpenAI,
    engine: Engine,
    settings: JudgeSettings,
    *,
    worker_id: str | None = None,
    concurrency: int | None = None,
    pace: bool = True,
) -> RunReport:
    """One round: select new samples (all tenants), judge every pending sample, pairwise pass.

    ``pace`` spreads the daily budget over the UTC day. Raises JudgeConfigError when the judge
    endpoint or model is not configured; judge failures are stored, never raised.
    """
    settings.require_endpoint()
    worker = worker_id or default_worker_id()
    reports = await asyncio.to_thread(select_new_samples, engine, settings, pace=pace)
    claimed, done, failed, requeued, exhausted = await judge_pending(
        client, engine, settings, worker_id=worker, concurrency=concurrency
    )
    pairs = await judge_rollout_pairs(client, engine, settings)
    return RunReport(
        considered=sum(r.considered for r in reports),
        sampled=sum(r.sampled for r in reports),
        claimed=claimed,
        judged=done,
        failed=failed,
        requeued=requeued,
        pairwise=pairs,
        budget_exhausted=exhausted,
    )


async def run_forever(
    client: openai.AsyncOpenAI,
    engine: Engine,
    settings: JudgeSettings,
    *,
    stop: asyncio.Event,
    worker_id: str | None = None,
    concurrency: int | None = None,
) -> None:
    """Repeat ``run_once`` every ``settings.interval_s`` seconds until ``stop`` is set.

    A failing round is logged and the loop continues.
    """
    while not stop.is_set():
        try:
            report = await run_once(
                client, engine, settings, worker_id=worker_id, concurrency=concurrency
            )
            log.info("judge round: %s", report)
        except JudgeError:
            raise
        except Exception:
            log.exception("judge round failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=settings.interval_s)
