"""The Overview's sparklines (:func:`dashboard.ui.sparkline_svg`): one polyline per run of known
values, scaled to the series' own range, nothing to draw below two known values."""

from __future__ import annotations

import base64
import math
import re

from dashboard import ui


def points(svg: str) -> list[list[tuple[float, float]]]:
    runs = re.findall(r'points="([^"]*)"', svg)
    return [[tuple(map(float, p.split(","))) for p in r.split()] for r in runs]  # type: ignore[misc]


def test_a_line_spans_the_width_and_the_series_range() -> None:
    runs = points(ui.sparkline_svg([1.0, 3.0, 2.0], height_px=28))
    assert len(runs) == 1
    xs = [x for x, _y in runs[0]]
    ys = [y for _x, y in runs[0]]
    assert xs == [0.0, 50.0, 100.0]
    assert ys[1] == min(ys) == 2.0 and ys[0] == max(ys) == 26.0  # SVG y grows downwards


def test_unknown_values_are_gaps_not_zeros() -> None:
    runs = points(ui.sparkline_svg([1.0, 2.0, None, math.nan, 5.0, 4.0]))
    assert [len(r) for r in runs] == [2, 2]
    assert runs[1][0][0] == 80.0  # the fifth of six values: its place on the x axis is kept


def test_nothing_to_draw() -> None:
    assert ui.sparkline_svg([]) == "" and ui.sparkline_svg([None, 1.0, None]) == ""
    assert ui.sparkline_html([2.0]) == ""
    flat = points(ui.sparkline_svg([0.0, 0.0, 0.0]))  # a flat series is a flat line
    assert len({y for _x, y in flat[0]}) == 1


def test_the_html_is_an_image_of_the_svg() -> None:
    html = ui.sparkline_html([1.0, 2.0])
    uri = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert uri is not None
    assert base64.b64decode(uri.group(1)).decode() == ui.sparkline_svg([1.0, 2.0])
