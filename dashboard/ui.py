"""What every page shares: settings, login, the tenant and time-range filters, formatting.

Outside ``--dev`` a visitor logs in with a driftline API key, verified by
:class:`collector.auth.KeyStore` and re-checked on every run (a revoked key ends the session);
the key's tenant is the only tenant shown and its role decides the actions offered (``review``:
labelling; ``admin``: rollout overrides). In ``--dev`` every tenant is visible and every action
allowed.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from collector.auth import AuthError, KeyStore, Principal, key_active
from dashboard import data
from dashboard.settings import DashboardSettings, load_dashboard_settings

#: stroke of the Overview's sparklines (Streamlit's default chart blue)
SPARKLINE_COLOR = "#1c83e1"
DEV_PRINCIPAL = Principal(tenant="default", role="admin", key_id=None)
#: label -> window length in seconds
TIME_RANGES: dict[str, int] = {
    "Last 15 minutes": 900,
    "Last hour": 3600,
    "Last 6 hours": 6 * 3600,
    "Last 24 hours": 86400,
    "Last 7 days": 7 * 86400,
    "Last 30 days": 30 * 86400,
}
DEFAULT_RANGE = "Last 24 hours"
#: every ASCII punctuation character: CommonMark lets each be backslash-escaped (spec 0.31,
#: "Backslash escapes"), which leaves no link, image, autolink, emphasis, heading, list, table,
#: LaTeX ($), HTML or Streamlit directive (:red[...], :material/icon:) in the text
_MD_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")


def fitting_range(span_s: float | None) -> str:
    """The shortest range that holds ``span_s`` seconds of data (the calls of the last 30
    days); :data:`DEFAULT_RANGE` without data. A 5-minute demo opens on "Last 15 minutes"."""
    if span_s is None:
        return DEFAULT_RANGE
    for label, seconds in TIME_RANGES.items():
        if span_s <= seconds:
            return label
    return list(TIME_RANGES)[-1]


@dataclass(frozen=True, slots=True)
class PageContext:
    """The filters of one page run: store, tenant, ``[since_ns, until_ns)`` (unix ns), who;
    ``exact``: the user asked for exact percentiles (every call read) over the ones the lake's
    hourly summaries answer within 1 % (:mod:`dashboard.summarystats`)."""

    settings: DashboardSettings
    database_url: str
    tenant: str
    tenants: tuple[str, ...]
    since_ns: int
    until_ns: int
    range_label: str
    principal: Principal
    exact: bool = False

    @property
    def window_s(self) -> float:
        """Length of the time range in seconds."""
        return (self.until_ns - self.since_ns) / 1e9

    @property
    def actor(self) -> str:
        """Who acts (audit logs, reviewer name): ``key:<key_id>`` or ``dashboard-dev``."""
        return f"key:{self.principal.key_id}" if self.principal.key_id else "dashboard-dev"

    def allows(self, permission: str) -> bool:
        """Whether the logged-in key may ``review`` / ``admin`` / ``read``."""
        return self.principal.allows(permission)


def settings() -> DashboardSettings:
    """The dashboard settings, built once per session from the environment."""
    if "driftline_settings" not in st.session_state:
        st.session_state["driftline_settings"] = load_dashboard_settings()
    s: DashboardSettings = st.session_state["driftline_settings"]
    return s


def _login(s: DashboardSettings) -> Principal | None:
    if s.dashboard_dev:
        return DEV_PRINCIPAL
    principal = st.session_state.get("driftline_principal")
    if isinstance(principal, Principal):
        # every run re-checks the key (one primary-key lookup): a revoked key ends the session
        if principal.key_id is None or key_active(data.engine(s.database_url), principal.key_id):
            return principal
        st.session_state.pop("driftline_principal", None)
        st.warning("This session's API key was revoked: log in with another key.")
    st.title("driftline")
    with st.form("login"):
        key = st.text_input("API key", type="password", placeholder="dl_...")
        submitted = st.form_submit_button("Log in")
    if submitted:
        try:
            principal = KeyStore(data.engine(s.database_url)).verify(f"Bearer {key.strip()}")
        except AuthError as exc:
            st.error(f"Login failed: {md(exc)}")
            return None
        if not principal.allows("read"):
            st.error(f"This key (role {principal.role}) may not read.")
            return None
        st.session_state["driftline_principal"] = principal
        st.rerun()
    return None


def page_context(title: str, caption: str | None = None) -> PageContext:
    """Log in (outside --dev), draw the sidebar filters and the page title; stops the run
    (``st.stop``) until a valid key is given."""
    s = settings()
    principal = _login(s)
    if principal is None:
        st.stop()
        raise RuntimeError("unreachable")  # st.stop() raises; this keeps type checkers honest
    if s.dashboard_dev:
        choices = tuple(data.tenants(s.database_url)) or ("default",)
    else:
        choices = (principal.tenant,)
    with st.sidebar:
        tenant = st.selectbox("Tenant", choices, key="flt_tenant")
        if "range_choice" not in st.session_state:
            # the first page a session opens picks the range that fits the tenant's data;
            # the choice then follows the user across pages (a widget's own state does not)
            now = now_ns()
            oldest = data.oldest_recent_call_ns(
                s.database_url, str(tenant), now - TIME_RANGES["Last 30 days"] * 1_000_000_000
            )
            st.session_state["range_choice"] = fitting_range(
                (now - oldest) / 1e9 if oldest is not None else None
            )
        label = st.selectbox(
            "Time range",
            list(TIME_RANGES),
            index=list(TIME_RANGES).index(st.session_state["range_choice"]),
            key="flt_range",
        )
        st.session_state["range_choice"] = label
        # like the range, the choice follows the user across pages
        exact = st.toggle(
            "Exact percentiles",
            value=bool(st.session_state.get("exact_choice", False)),
            key="flt_exact",
            help=(
                "Off: percentiles of sealed hours come from the lake's hourly summaries, within "
                "1 % of the exact value (counts, rates and cost stay exact). On: every call of "
                "the range is read (slower over weeks of traffic)."
            ),
        )
        st.session_state["exact_choice"] = exact
        if st.button("Refresh data", key="flt_refresh"):
            st.cache_data.clear()
            data.calls.clear()  # call frames are a resource cache (see there)
        who = "dev mode (no login)" if s.dashboard_dev else f"{principal.role} key"
        st.caption(f"{who} · cache {data.CACHE_TTL_S} s")
        if not s.dashboard_dev and st.button("Log out", key="flt_logout"):
            st.session_state.pop("driftline_principal", None)
            st.rerun()
    until = now_ns()
    st.title(title)
    if caption:
        st.caption(caption)
    return PageContext(
        settings=s,
        database_url=s.database_url,
        tenant=str(tenant),
        tenants=tuple(choices),
        since_ns=until - TIME_RANGES[str(label)] * 1_000_000_000,
        until_ns=until,
        range_label=str(label),
        principal=principal,
        exact=bool(exact),
    )


def md(value: object) -> str:
    """``value`` as text that Markdown shows verbatim: for span data (names, ids, models,
    messages, prompts) in anything Streamlit renders as Markdown (``st.markdown``, captions,
    titles, alerts, metric labels and values, widget labels, tooltips, tabs, expanders).

    ``[click](http://evil)`` shows as those characters, not as a link (an image would load
    on its own); line breaks become spaces (no new block). Tables (``st.dataframe``),
    ``st.text`` and ``st.code`` are plain text already and need no escaping.
    """
    text = _MD_PUNCT.sub(r"\\\1", str(value))
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def md_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells (and column names) are :func:`md`-escaped, for
    ``st.table``, which renders Markdown in its cells; numbers and nulls are left as they are."""
    out = frame.rename(columns=lambda c: md(c) if isinstance(c, str) else c)
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(lambda v: md(v) if isinstance(v, str) else v)
    return out


def now_ns(granularity_s: int = 10) -> int:
    """Now (unix ns) floored to ``granularity_s`` so cached queries share their key."""
    step = granularity_s * 1_000_000_000
    return (time.time_ns() // step) * step


def no_data(what: str, why: str) -> None:
    """The standard "no data yet" state of a section."""
    st.info(f"**No {what} yet.** {why}", icon=":material/hourglass_empty:")


def sparkline_svg(values: Sequence[float | None], height_px: int = 28) -> str:
    """An SVG document of one line through ``values`` (oldest first; None or NaN: a gap),
    scaled to its own minimum and maximum and stretched to the width it is drawn at; ``""``
    with fewer than two known values."""
    known = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if len(known) < 2:
        return ""
    lo, hi = min(known), max(known)
    span = (hi - lo) or 1.0
    n = len(values)
    runs: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None or math.isnan(float(v)):
            runs.append([])
            continue
        x = i / (n - 1) * 100.0
        y = (height_px - 2) - (float(v) - lo) / span * (height_px - 4)
        runs[-1].append(f"{x:.2f},{y:.2f}")
    lines = "".join(
        f'<polyline points="{" ".join(r)}" fill="none" stroke="{SPARKLINE_COLOR}" '
        'stroke-width="1.5" vector-effect="non-scaling-stroke"/>'
        for r in runs
        if len(r) >= 2
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 {height_px}" '
        f'preserveAspectRatio="none">{lines}</svg>'
    )


def sparkline_html(values: Sequence[float | None], height_px: int = 28) -> str:
    """``<img>`` of :func:`sparkline_svg` (a ``data:`` URI, full width), ``""`` when there is no
    line to draw. An image of a few hundred bytes: the browser draws it as part of the page,
    where a chart element costs a Vega view of its own (~0.1 s of browser CPU each on the
    benchmark machine; the Overview had 13)."""
    svg = sparkline_svg(values, height_px)
    if not svg:
        return ""
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    return (
        f'<img src="{uri}" alt="trend" width="100%" height="{height_px}" '
        f'style="display: block; width: 100%; height: {height_px}px">'
    )


def metric_card(
    where: Any,
    label: str,
    value: str | int,
    trend: Sequence[float | None] | None = None,
    help: str | None = None,
) -> None:
    """A bordered card in ``where`` (a column): ``st.metric`` of ``label`` / ``value`` and, when
    ``trend`` has two known values or more, its :func:`sparkline_html` below."""
    with where.container(border=True):
        st.metric(label, value, help=help)
        line = sparkline_html(trend) if trend is not None else ""
        if line:
            st.html(line)


def fmt(value: float | None, unit: str, digits: int = 3) -> str:
    """``1.234 s`` / ``12 %`` / ``$0.0123``; ``–`` when unknown. ``ms`` takes seconds and shows
    ``850 ms`` below one second, ``2.15 s`` from one second on (a card stays readable)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if unit == "%":
        return f"{value * 100:.{max(digits - 2, 1)}f} %"
    if unit == "USD":
        return f"${value:,.{max(digits, 2)}f}"
    if unit == "ms":
        return f"{value * 1000:,.0f} ms" if abs(value) < 1 else f"{value:,.3g} s"
    return f"{value:,.{digits}g} {unit}".strip()


def _printf(fmt: str | None, value: object) -> str:
    if isinstance(value, pd.Timestamp | dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if fmt and isinstance(value, int | float):
        try:
            return fmt % value
        except (TypeError, ValueError):
            pass
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def readable(
    df: pd.DataFrame, column_config: dict[str, Any] | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``df`` with every unknown cell (None, NaN, NaT, <NA>) shown as "–" instead of Python's
    ``None``/``nan``: a column with a missing value becomes text, formatted like its
    ``column_config`` number format said (printf style), keeping the column's label."""
    cfg: dict[str, Any] = dict(column_config or {})
    out = df.copy()
    for col in out.columns:
        s = out[col]
        try:
            missing = s.isna()
        except (TypeError, ValueError):
            continue
        if not bool(missing.any()):
            continue
        c = cfg.get(col)
        c = dict(c) if isinstance(c, dict) else {}
        fmt = (c.get("type_config") or {}).get("format")
        out[col] = ["–" if miss else _printf(fmt, v) for v, miss in zip(s, missing, strict=True)]
        cfg[col] = st.column_config.TextColumn(
            c.get("label") or str(col), help=c.get("help"), width=c.get("width")
        )
    return out, cfg


def table(df: pd.DataFrame, column_config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """``st.dataframe`` of :func:`readable` ``df`` (unknown values as "–")."""
    shown, cfg = readable(df, column_config)
    return st.dataframe(shown, column_config=cfg or None, **kwargs)
