"""The delivery worker: sends due outbox notifications over HTTP, signs them, retries.

One attempt = one signed ``POST`` of the stored body with the notification id as
``webhook-id`` and ``Idempotency-Key`` (same on every attempt), a fresh ``webhook-timestamp``
and ``webhook-signature`` (Standard Webhooks). Outcomes and backoff follow
:mod:`collector.retry`. Time and sleeping are injected (``clock`` / ``sleep``) so tests of
hour-long outages run in milliseconds; only the HTTP timeout runs on the real clock.

Deadline: one attempt (connect, send and the whole answer) ends within the receiver's
``timeout_s`` (at most :data:`alerts.receivers.RECEIVER_MAX_TIMEOUT_S`), however slowly the
receiver trickles (:func:`collector.egress.deadline`, enforced by the worker's egress client);
any exception of one attempt is a failed attempt, never a stuck notification. The background
job does not wait for slow attempts (:meth:`DeliveryWorker.run_once` with ``wait_s``): a slow
receiver holds one pool thread and its own notification's lease, never other receivers'.

Egress: the worker's HTTP client connects only where its :class:`collector.egress.EgressPolicy`
allows (public addresses, plus ``DRIFTLINE_EGRESS_ALLOW``), checked on the resolved address at
connect time; a denied address is a permanent failure (retrying would not help), redirects are
never followed, and at most :data:`MAX_ERROR_BODY_BYTES` of a failed response's body are read
and kept (shown to admin keys only, by the API).

Order: attempts run in parallel across groups, but the notifications of one (tenant, receiver,
group) go one at a time in their ``seq`` order: :func:`alerts.outbox.claim_due` only
hands out the head of each group, so a ``resolved`` never overtakes its ``firing`` (a later
notification waits until the earlier one is delivered or finally failed).

Metrics (in the ``registry`` passed in):

* ``driftline_alert_delivery_attempts_total{tenant,receiver,result}`` — result ``delivered``,
  ``retry`` or ``permanent``;
* ``driftline_alert_notifications_delivered_total{tenant,receiver}``;
* ``driftline_alert_notifications_failed_total{tenant,receiver,reason}`` — reason
  ``permanent``, ``max_attempts``, ``max_age`` or ``unknown_receiver``;
* ``driftline_alert_outbox_notifications{status}`` — gauge of outbox rows by status.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import httpx
import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import Engine

from alerts import outbox
from alerts.receivers import RECEIVER_MAX_TIMEOUT_S, Receiver, ReceiverDirectory
from alerts.signing import signature_headers
from collector import egress
from collector.retry import (
    Outcome,
    RetryPolicy,
    backoff_delay,
    classify,
    parse_retry_after,
    schedule_retry,
)

log = logging.getLogger(__name__)
USER_AGENT = "driftline-alerts/0.1"
#: bytes of a failed response's body kept in the outbox (the rest is never read)
MAX_ERROR_BODY_BYTES = 512


@dataclass(frozen=True)
class AttemptResult:
    """One HTTP attempt. ``status_code`` None = no response (timeout / connection error)."""

    outcome: Outcome
    status_code: int | None
    error: str | None
    retry_after_s: float | None


def send_once(
    client: httpx.Client,
    receiver: Receiver,
    *,
    msg_id: str,
    body: bytes,
    now: float,
    timeout_s: float,
) -> AttemptResult:
    """POST ``body`` to ``receiver`` once, signed at ``now`` (unix seconds).

    The attempt's total deadline is ``receiver.timeout_s or timeout_s`` seconds, cut to
    :data:`RECEIVER_MAX_TIMEOUT_S` (enforced by a :func:`collector.egress.client`; another
    client gets it as httpx's per-operation timeout only).

    Never raises: a destination the client's egress policy denies is a permanent result
    (:class:`collector.egress.EgressDenied`); network errors, the deadline and any other
    exception are a retryable result naming the error type. Redirects are not followed. Of a
    failed response's body at most :data:`MAX_ERROR_BODY_BYTES` are read (NULs dropped:
    PostgreSQL text cannot hold them) into ``error``.
    """
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "idempotency-key": msg_id,
        "accept-encoding": "identity",  # the error body is read raw, never decompressed
        **receiver.headers,
    }
    secrets = receiver.signing_secrets(now)
    headers.update(signature_headers(secrets, msg_id, int(now), body))
    limit = min(receiver.timeout_s or timeout_s, RECEIVER_MAX_TIMEOUT_S)
    try:
        with (
            egress.deadline(limit),
            client.stream(
                "POST",
                receiver.url,
                content=body,
                headers=headers,
                timeout=httpx.Timeout(limit),
                follow_redirects=False,
            ) as resp,
        ):
            outcome = classify(resp.status_code)
            error = None
            if outcome is not Outcome.DELIVERED:
                error = f"HTTP {resp.status_code}: {_head(resp)}"
    except egress.EgressDenied as exc:
        return AttemptResult(Outcome.PERMANENT, None, f"egress denied: {exc}", None)
    except httpx.TimeoutException as exc:
        return AttemptResult(Outcome.RETRY, None, f"timeout: {type(exc).__name__}", None)
    except httpx.TransportError as exc:
        return AttemptResult(Outcome.RETRY, None, f"{type(exc).__name__}: {exc}", None)
    except Exception as exc:  # one odd attempt is a failed attempt, never a stuck notification
        log.warning("attempt of %s to %s failed: %r", msg_id, receiver.name, exc)
        return AttemptResult(Outcome.RETRY, None, f"error: {type(exc).__name__}", None)
    return AttemptResult(
        outcome, resp.status_code, error, parse_retry_after(resp.headers.get("retry-after"), now)
    )


def _head(resp: httpx.Response) -> str:
    """The first :data:`MAX_ERROR_BODY_BYTES` of a streamed body as text (the rest unread)."""
    got = b""
    try:
        for chunk in resp.iter_raw():
            got += chunk
            if len(got) >= MAX_ERROR_BODY_BYTES:
                break
    except httpx.HTTPError:  # a body cut short: keep what came
        pass
    text = got[:MAX_ERROR_BODY_BYTES].decode("utf-8", "replace").replace("\x00", "")
    return text + (" [truncated]" if len(got) > MAX_ERROR_BODY_BYTES else "")


class DeliveryWorker:
    """Drains the outbox of every tenant.

    Args:
        engine: the store (SQLite or PostgreSQL) holding ``alert_notifications``.
        receivers: looks receivers up by (tenant, name) at send time.
        registry: prometheus registry the metrics are registered in.
        rng: source of backoff jitter.
        policy: retry limits; ``policy.request_timeout_s`` is the per-attempt timeout.
        egress_policy: where the worker may connect (public addresses only when None; an
            app passes the one of ``DRIFTLINE_EGRESS_ALLOW``); used for the default client.
        client: httpx client (default: :func:`collector.egress.client` of ``egress_policy``,
            created and closed by :meth:`close`); a client given here does its own checks.
        clock: unix seconds now; sleep: waits seconds (both injectable for tests).
        batch_size: rows claimed per round; concurrency: parallel HTTP attempts, so one hanging
            receiver does not hold up the others in its batch.
    """

    def __init__(
        self,
        engine: Engine,
        receivers: ReceiverDirectory,
        *,
        registry: CollectorRegistry,
        rng: np.random.Generator,
        policy: RetryPolicy | None = None,
        egress_policy: egress.EgressPolicy | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        batch_size: int = 32,
        concurrency: int = 16,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.engine = engine
        self.receivers = receivers
        self.policy = policy or RetryPolicy()
        self.rng = rng
        self.clock = clock
        self.sleep = sleep
        self.batch_size = batch_size
        self._own_client = client is None
        self.client = client or egress.client(egress_policy or egress.EgressPolicy())
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="alerts")
        self._rng_lock = threading.Lock()
        self.attempts = Counter(
            "driftline_alert_delivery_attempts",
            "Webhook delivery attempts by result.",
            ["tenant", "receiver", "result"],
            registry=registry,
        )
        self.delivered = Counter(
            "driftline_alert_notifications_delivered",
            "Notifications delivered (2xx).",
            ["tenant", "receiver"],
            registry=registry,
        )
        self.failed = Counter(
            "driftline_alert_notifications_failed",
            "Notifications given up on, by reason.",
            ["tenant", "receiver", "reason"],
            registry=registry,
        )
        self.outbox_gauge = Gauge(
            "driftline_alert_outbox_notifications",
            "Outbox rows by status.",
            ["status"],
            registry=registry,
        )

    @property
    def lease_s(self) -> float:
        """How long a claimed row stays hidden: the longest attempt (its total deadline, at
        most :data:`RECEIVER_MAX_TIMEOUT_S`) plus a margin, so it is never claimed twice."""
        return max(self.policy.request_timeout_s, RECEIVER_MAX_TIMEOUT_S) + 30.0

    def run_once(self, *, wait_s: float | None = None) -> int:
        """Attempt every notification due now (one batch); returns the attempts finished.

        ``wait_s``: None waits for every attempt of the batch (each ends by its deadline);
        a number waits at most that many seconds, and the attempts still running finish in
        the background (their rows stay leased, so no later round claims them again) — the
        background job's way, so one slow receiver never holds up other receivers' rounds.
        Never raises for one bad notification: it is logged with its id and counted.
        """
        now = self.clock()
        items = outbox.claim_due(self.engine, now, limit=self.batch_size, lease_s=self.lease_s)
        futures = {self._pool.submit(self._deliver, item): item for item in items}
        for fut, item in futures.items():
            fut.add_done_callback(functools.partial(self._crashed, item))
        finished, _ = wait(futures, timeout=wait_s)
        done = sum(f.result() for f in finished if f.exception() is None)
        self.refresh_gauges()
        return done

    @staticmethod
    def _crashed(item: outbox.OutboxItem, fut: Future[int]) -> None:
        exc = fut.exception()
        if exc is not None:
            log.error("alert delivery of %s/%s crashed", item.tenant, item.id, exc_info=exc)

    def refresh_gauges(self) -> None:
        """Set the outbox gauge from the table (every status, 0 when absent)."""
        counts = outbox.count_by_status(self.engine)
        for status in (outbox.PENDING, outbox.DELIVERED, outbox.FAILED):
            self.outbox_gauge.labels(status=status).set(counts.get(status, 0))

    def run_pending(self, *, until: float | None = None) -> int:
        """Deliver until nothing is pending (or the clock passes ``until``), sleeping through
        backoff delays with the injected ``sleep``; returns the number of attempts made."""
        total = 0
        while True:
            total += self.run_once()
            due = outbox.next_due_at(self.engine)
            now = self.clock()
            if due is None or (until is not None and due > until):
                return total
            if due > now:
                self.sleep(due - now)

    def run_forever(self, stop: threading.Event, *, poll_s: float = 1.0) -> None:
        """Background loop: deliver due notifications until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.run_once(wait_s=poll_s)
            except Exception:
                log.exception("alert delivery round failed; retrying in %.1f s", poll_s)
            stop.wait(poll_s)

    def close(self) -> None:
        """Stop the thread pool and close the HTTP client if this worker created it."""
        self._pool.shutdown(wait=True)
        if self._own_client:
            self.client.close()

    def _deliver(self, item: outbox.OutboxItem) -> int:
        receiver = self.receivers.get(item.tenant, item.receiver)
        if receiver is None:
            log.error(
                "notification %s: receiver %r of tenant %r is not configured",
                item.id,
                item.receiver,
                item.tenant,
            )
            outbox.mark_failed(self.engine, item, now=self.clock(), reason="unknown_receiver")
            self.failed.labels(item.tenant, item.receiver, "unknown_receiver").inc()
            return 0
        res = send_once(
            self.client,
            receiver,
            msg_id=item.id,
            body=item.payload,
            now=self.clock(),
            timeout_s=self.policy.request_timeout_s,
        )
        now = self.clock()
        attempts_made = item.attempts + 1
        self.attempts.labels(item.tenant, item.receiver, res.outcome.value).inc()
        if res.outcome is Outcome.DELIVERED:
            outbox.record_attempt(
                self.engine,
                item,
                now=now,
                status_code=res.status_code,
                error=None,
                delivered=True,
                retry_at=None,
                delay_s=None,
                failure_reason=None,
            )
            self.delivered.labels(item.tenant, item.receiver).inc()
            return 1
        if res.outcome is Outcome.PERMANENT:
            reason: str | None = "permanent"
            retry_at = delay = None
        else:
            with self._rng_lock:
                delay = backoff_delay(
                    self.policy,
                    attempts_made,
                    rng=self.rng,
                    previous_delay_s=item.last_delay_s,
                    retry_after_s=res.retry_after_s,
                )
            sched = schedule_retry(
                self.policy,
                created_at=item.created_at,
                attempts_made=attempts_made,
                now=now,
                delay_s=delay,
            )
            retry_at, delay, reason = sched.retry_at, sched.delay_s, sched.failure_reason
        outbox.record_attempt(
            self.engine,
            item,
            now=now,
            status_code=res.status_code,
            error=res.error,
            delivered=False,
            retry_at=retry_at,
            delay_s=delay,
            failure_reason=reason,
        )
        if reason is not None:
            log.warning(
                "notification %s to %s/%s failed after %d attempt(s) (%s): %s",
                item.id,
                item.tenant,
                item.receiver,
                attempts_made,
                reason,
                res.error,
            )
            self.failed.labels(item.tenant, item.receiver, reason).inc()
        else:
            log.info(
                "notification %s to %s/%s: attempt %d failed (%s), retry in %.1f s",
                item.id,
                item.tenant,
                item.receiver,
                attempts_made,
                res.error,
                delay or 0,
            )
        return 1
