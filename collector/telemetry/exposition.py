"""What a ``/metrics`` scrape may see: the Prometheus exposition scoped to the caller.

Three views of the collector's registries (``collector.telemetry.metrics`` holds process and
ingest health, :mod:`collector.telemetry.kpis` the per-tenant LLM KPIs):

* anonymous (no key): the health registry only, without any sample that carries a ``tenant``
  label (e.g. per-tenant alert delivery counters) — no tenant, model or cost label leaks;
* a key that may read: health plus KPI series, only samples of the key's tenant, with the
  ``tenant`` label removed (the scrape is already scoped);
* an admin key (or ``--dev``): everything, ``tenant`` label kept (an operator's Prometheus).

Pure over :class:`prometheus_client.CollectorRegistry` objects (or anything with ``collect()``,
e.g. :class:`ExpositionFile`, the KPIs of a spool processor in another process); the route
decides who is who. Families of the same name from several sources are merged: samples with the
same name and labels are summed (counters, histogram buckets, sums and counts add up across
processes), ``_created`` keeps the earliest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

TENANT_LABEL = "tenant"


class Source(Protocol):
    """A registry or custom collector: something that yields metric families."""

    def collect(self) -> Iterable[Metric]: ...


class ExpositionFile:
    """The metric families in a Prometheus text-format file another process rewrites
    (atomically); none while the file is missing or unreadable."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def collect(self) -> Iterator[Metric]:
        try:
            text = self.path.read_text()
        except OSError:
            return
        try:
            families = list(text_string_to_metric_families(text))
        except ValueError:  # half-written by a foreign tool: skip this scrape
            return
        for m in families:  # the parser turns ``*_created`` samples into gauges: drop them
            if not (m.type == "gauge" and m.name.endswith("_created")):
                yield m


def merged(metrics: Iterable[Metric]) -> Iterator[Metric]:
    """Families of the same name merged into one (first seen keeps its place): samples with
    equal name and labels summed, ``*_created`` the earliest."""
    by_name: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], Sample]] = {}
    for m in metrics:
        if m.name not in by_name:
            by_name[m.name] = Metric(m.name, m.documentation, m.type, m.unit)
            values[m.name] = {}
        acc = values[m.name]
        for s in m.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            old = acc.get(key)
            if old is None:
                acc[key] = s
            elif s.name.endswith("_created"):
                acc[key] = old._replace(value=min(old.value, s.value))
            else:
                acc[key] = old._replace(value=old.value + s.value)
    for name, out in by_name.items():
        out.samples = list(values[name].values())
        yield out


def _filtered(metric: Metric, tenant: str | None) -> Metric | None:
    """``metric`` with only the samples of ``tenant`` (label dropped) and the samples without a
    tenant label; ``tenant`` None keeps only the latter. None when nothing is left of a
    family that had tenant samples."""
    kept: list[Sample] = []
    had_tenant = False
    for s in metric.samples:
        owner = s.labels.get(TENANT_LABEL)
        if owner is None:
            kept.append(s)
            continue
        had_tenant = True
        if tenant is not None and owner == tenant:
            labels = {k: v for k, v in s.labels.items() if k != TENANT_LABEL}
            kept.append(s._replace(labels=labels))
    if had_tenant and not kept:
        return None
    out = Metric(metric.name, metric.documentation, metric.type, metric.unit)
    out.samples = kept
    return out


class _Scoped:
    """A custom collector yielding the scoped families of ``registries``."""

    def __init__(self, registries: Sequence[Source], tenant: str | None, all_tenants: bool) -> None:
        self._registries = registries
        self._tenant = tenant
        self._all = all_tenants

    def collect(self) -> Iterator[Metric]:
        for metric in merged(m for reg in self._registries for m in reg.collect()):
            if self._all:
                yield metric
                continue
            scoped = _filtered(metric, self._tenant)
            if scoped is not None:
                yield scoped


def scoped(
    health: CollectorRegistry,
    kpis: Iterable[Source] = (),
    *,
    tenant: str | None,
    all_tenants: bool = False,
) -> bytes:
    """The text exposition a caller may see.

    Args:
        health: process and ingest-health metrics (always shown; tenant-labelled samples only
            as below).
        kpis: registries of per-tenant series (shown only to a key: ``tenant`` set or
            ``all_tenants``).
        tenant: the reading key's tenant; None for an anonymous scrape.
        all_tenants: admin view: every series unfiltered, ``tenant`` label kept.

    Returns:
        Prometheus text format 0.0.4 bytes (``prometheus_client.generate_latest``).
    """
    registries: list[Source] = [health]
    if tenant is not None or all_tenants:
        registries += list(kpis)
    view = CollectorRegistry(auto_describe=False)
    view.register(_Scoped(registries, tenant, all_tenants))
    return generate_latest(view)
