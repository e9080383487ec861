"""What a ``/metrics`` scrape may see: the Prometheus exposition scoped to the caller.

Three views of the collector's registries (``collector.telemetry.metrics`` holds process and
ingest health, :mod:`collector.telemetry.kpis` the per-tenant LLM KPIs):

* anonymous (no key): the health registry only, without any sample that carries a ``tenant``
  label (e.g. per-tenant alert delivery counters) — no tenant, model or cost label leaks;
* a key that may read: health plus KPI series, only samples of the key's tenant, with the
  ``tenant`` label removed (the scrape is already scoped);
* an admin key (or ``--dev``): everything, ``tenant`` label kept (an operator's Prometheus).

Pure over :class:`prometheus_client.CollectorRegistry` objects; the route decides who is who.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

TENANT_LABEL = "tenant"


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

    def __init__(
        self, registries: Sequence[CollectorRegistry], tenant: str | None, all_tenants: bool
    ) -> None:
        self._registries = registries
        self._tenant = tenant
        self._all = all_tenants

    def collect(self) -> Iterator[Metric]:
        for reg in self._registries:
            for metric in reg.collect():
                if self._all:
                    yield metric
                    continue
                scoped = _filtered(metric, self._tenant)
                if scoped is not None:
                    yield scoped


def scoped(
    health: CollectorRegistry,
    kpis: Iterable[CollectorRegistry] = (),
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
    registries = [health]
    if tenant is not None or all_tenants:
        registries += list(kpis)
    view = CollectorRegistry(auto_describe=False)
    view.register(_Scoped(registries, tenant, all_tenants))
    return generate_latest(view)
