"""Altair charts of the dashboard; every axis title carries its unit."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

TIME_AXIS = alt.Axis(format="%H:%M", title="time (UTC)")


def line(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    y_title: str,
    color: str | None = None,
    stroke_dash: str | None = None,
    height: int = 260,
    y_format: str | None = None,
) -> alt.Chart:
    """A time series line chart (``x`` a UTC datetime column), one line per ``color``."""
    enc: dict[str, object] = {
        "x": alt.X(f"{x}:T", axis=TIME_AXIS),
        # axis=None would drop the y-axis (ticks and title): keep one, formatted when asked
        "y": alt.Y(f"{y}:Q", title=y_title, axis=alt.Axis(format=y_format or alt.Undefined)),
        "tooltip": [alt.Tooltip(f"{x}:T", format="%H:%M"), alt.Tooltip(f"{y}:Q", format=".4g")],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color)
        enc["tooltip"] = [*enc["tooltip"], f"{color}:N"]  # type: ignore[misc]
    if stroke_dash:
        enc["strokeDash"] = alt.StrokeDash(f"{stroke_dash}:N", title=stroke_dash)
    return alt.Chart(df).mark_line(point=False).encode(**enc).properties(height=height)


def bars(
    df: pd.DataFrame, *, x: str, y: str, x_title: str, color: str | None = None, height: int = 240
) -> alt.Chart:
    """Horizontal bars: ``x`` quantitative (with unit in ``x_title``), ``y`` the category."""
    enc: dict[str, object] = {
        "x": alt.X(f"{x}:Q", title=x_title),
        "y": alt.Y(f"{y}:N", title=None, sort="-x"),
        "tooltip": [f"{y}:N", alt.Tooltip(f"{x}:Q", format=".4g")],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color)
    return alt.Chart(df).mark_bar().encode(**enc).properties(height=height)


def show(chart: alt.Chart | alt.LayerChart | alt.FacetChart) -> None:
    """Render an Altair chart at the container's width."""
    st.altair_chart(chart, width="stretch")
