"""Before the write queue: each span through its tenant's content policy and into its LLM-call
facts (:class:`Item`), on the receiver's thread so the writer thread only writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collector.ingest.capture import apply_policy
from collector.ingest.normalize import Extract, extract
from collector.ingest.redaction_budget import (
    DEFAULT_CPU_S,
    DEFAULT_RECORD_CPU_S,
    RecordBudget,
    record_budget,
)
from collector.store.schema import SpanData

log = logging.getLogger(__name__)

__all__ = ["Item", "prepare", "prepare_by_tenant"]


@dataclass(frozen=True, slots=True)
class Item:
    """A decoded span and its LLM-call facts (None when it is not an LLM call); ``tenant``
    overrides the tenant of the request it came in (a gateway key's span, see
    :func:`collector.auth.span_tenant`); None: the request's tenant. ``rewrite``: a stored span
    written again (e.g. with log content that arrived after it), so its call is not new and the
    per-call metrics do not count it twice."""

    span: SpanData
    extract: Extract | None
    tenant: str | None = None
    rewrite: bool = False


def prepare(
    spans: Sequence[SpanData],
    max_text_chars: int,
    capture_mode: str = "full",
    *,
    tenant: str | None = None,
    redaction_cpu_s: float = DEFAULT_CPU_S,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
) -> tuple[list[Item], list[str]]:
    """Apply the tenant's content policy, then extract every span; a span whose
    normalisation fails is returned as an error message instead. ``tenant``: the items'
    tenant override (:attr:`Item.tenant`).

    Redaction is bounded (:mod:`collector.ingest.redaction_budget`): each text is truncated
    to ``max_text_chars`` before it is scanned, a span's texts share ``redaction_cpu_s`` CPU
    seconds, and all spans of ``spans`` (one spooled record or direct request) share
    ``redaction_cpu_s_per_record``; text past a bound is replaced by a marker.

    Raises:
        ValueError: a bound is not positive.
    """
    items: list[Item] = []
    errors: list[str] = []
    with record_budget(max_text_chars, redaction_cpu_s, redaction_cpu_s_per_record) as budget:
        _prepare_into(spans, capture_mode, tenant, budget, items, errors)
    return items, errors


def _prepare_into(
    spans: Sequence[SpanData],
    capture_mode: str,
    tenant: str | None,
    budget: RecordBudget,
    items: list[Item],
    errors: list[str],
) -> None:
    max_text_chars = budget.max_chars
    for s in spans:
        try:
            budget.restart()  # a budget per span, within the batch's
            stored, redactions = apply_policy(s, capture_mode)
            ex = extract(stored, max_text_chars=max_text_chars, redactions=redactions)
            items.append(Item(stored, ex, tenant))
        except Exception as exc:  # one bad span never loses its batch
            log.warning("span %s/%s could not be normalised: %r", s.trace_id, s.span_id, exc)
            errors.append(f"span {s.span_id} of trace {s.trace_id} could not be normalised: {exc}")


def prepare_by_tenant(
    spans: Sequence[SpanData],
    max_text_chars: int,
    *,
    tenant: str,
    tenant_of: Callable[[SpanData], str],
    capture_mode_of: Callable[[str], str],
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
) -> tuple[list[Item], list[str]]:
    """:func:`prepare` for a request whose spans may belong to several tenants (a gateway
    key's): ``tenant_of(span)`` decides each span's tenant, whose own content policy
    (``capture_mode_of(tenant)``) applies; spans of another tenant than the request's
    ``tenant`` carry it as their :attr:`Item.tenant`. The request's spans share one
    ``redaction_cpu_s_per_record``, whatever their tenants.

    Raises:
        ValueError: a bound is not positive.
    """
    groups: dict[str, list[SpanData]] = {}
    for s in spans:
        groups.setdefault(tenant_of(s), []).append(s)
    items: list[Item] = []
    errors: list[str] = []
    with record_budget(max_text_chars, DEFAULT_CPU_S, redaction_cpu_s_per_record) as budget:
        for t, group in groups.items():
            mode = capture_mode_of(t)
            _prepare_into(group, mode, None if t == tenant else t, budget, items, errors)
    return items, errors
