"""The gateway's ``/metrics`` as the Capacity page reads it: over HTTP, within the egress policy.

The URL comes from the page's input or its ``?gateway=`` query parameter, so any logged-in user
(or a crafted link) chooses where the dashboard server connects. The fetch goes through
:func:`collector.egress.client`: public addresses only unless ``DRIFTLINE_EGRESS_ALLOW`` lists
the gateway (the demo lists its own), checked on the resolved address at connect time, no
redirects, and at most :data:`MAX_METRICS_BYTES` of the answer are read.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from collector import egress

#: the longest ``/metrics`` answer read (a gateway's is a few KB)
MAX_METRICS_BYTES = 4 << 20


@dataclass(frozen=True)
class GatewayMetrics:
    """``frame``: rows ``(name, labels..., value)`` of the ``driftline_*`` samples, None when
    not read; ``error``: why not (shown to the user), None when read."""

    frame: pd.DataFrame | None
    error: str | None


def read_gateway_metrics(url: str, policy: egress.EgressPolicy) -> GatewayMetrics:
    """GET ``<url>/metrics`` within ``policy`` (2 s timeout) and parse its ``driftline_*``
    samples. Never raises: a refused, unreachable, oversized or unparsable answer comes back as
    ``error``."""
    target = f"{url.rstrip('/')}/metrics"
    try:
        policy.check_url(target)
        with egress.client(policy, timeout=2.0) as client, client.stream("GET", target) as resp:
            body = b""
            for chunk in resp.iter_raw():
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return GatewayMetrics(None, f"{target}: answer over {MAX_METRICS_BYTES} bytes")
        if resp.status_code != 200:
            return GatewayMetrics(None, f"{target} answered HTTP {resp.status_code}")
        rows = [
            {"name": s.name, **s.labels, "value": float(s.value)}
            for fam in text_string_to_metric_families(body.decode("utf-8", "replace"))
            for s in fam.samples
            if s.name.startswith("driftline_")
        ]
    except egress.EgressDenied as exc:
        return GatewayMetrics(None, f"not fetched: {exc}")
    except (httpx.HTTPError, ValueError) as exc:
        return GatewayMetrics(None, f"{target} is unreachable: {type(exc).__name__}")
    return GatewayMetrics(pd.DataFrame(rows), None)
