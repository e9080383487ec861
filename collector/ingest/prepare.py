"""Before the write queue: each span through its tenant's content policy and into its LLM-call
facts (:class:`Item`), on the receiver's thread so the writer thread only writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collector.ingest.capture import apply_policy
from collector.ingest.normalize import Extract, extract
from collector.ingest.redaction_budget import DEFAULT_CPU_S, record_budget
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
) -> tuple[list[Item], list[str]]:
    """Apply the tenant's content policy, then extract every span; a span whose
    normalisation fails is returned as an error message instead. ``tenant``: the items'
    tenant override (:attr:`Item.tenant`).

    Redaction is bounded per span (:mod:`collector.ingest.redaction_budget`): each text is
    truncated to ``max_text_chars`` before it is scanned, and a span's texts share
    ``redaction_cpu_s`` CPU seconds; text past either bound is replaced by a marker."""
    items: list[Item] = []
    errors: list[str] = []
    with record_budget(max_text_chars, redaction_cpu_s) as budget:
        for s in spans:
            try:
                budget.restart()  # a budget per span
                stored, redactions = apply_policy(s, capture_mode)
                ex = extract(stored, max_text_chars=max_text_chars, redactions=redactions)
                items.append(Item(stored, ex, tenant))
            except Exception as exc:  # one bad span never loses its batch
                log.warning("span %s/%s could not be normalised: %r", s.trace_id, s.span_id, exc)
                errors.append(
                    f"span {s.span_id} of trace {s.trace_id} could not be normalised: {exc}"
                )
    return items, errors


def prepare_by_tenant(
    spans: Sequence[SpanData],
    max_text_chars: int,
    *,
    tenant: str,
    tenant_of: Callable[[SpanData], str],
    capture_mode_of: Callable[[str], str],
) -> tuple[list[Item], list[str]]:
    """:func:`prepare` for a request whose spans may belong to several tenants (a gateway
    key's): ``tenant_of(span)`` decides each span's tenant, whose own content policy
    (``capture_mode_of(tenant)``) applies; spans of another tenant than the request's
    ``tenant`` carry it as their :attr:`Item.tenant`."""
    groups: dict[str, list[SpanData]] = {}
    for s in spans:
        groups.setdefault(tenant_of(s), []).append(s)
    items: list[Item] = []
    errors: list[str] = []
    for t, group in groups.items():
        its, errs = prepare(
            group, max_text_chars, capture_mode_of(t), tenant=None if t == tenant else t
        )
        items += its
        errors += errs
    return items, errors
