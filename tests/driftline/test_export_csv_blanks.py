"""CSV neutralisation looks past leading blanks and control characters and knows full-width
signs, ``|`` and ``;`` (attack report item 10: `` =1+1``, ``\\n=2+3``, ``\\x00=1+1``,
``|calc``, ``;=1+1`` and ``＝1+1`` were written as they came).

Through the real writer (:func:`collector.store.exports.write`) to CSV bytes read back with
:mod:`csv`.
"""

from __future__ import annotations

import csv
import io

import pytest

from collector.store import exports

ATTACKS = [
    " =1+1",
    "\n=2+3",
    "\x00=1+1",
    "|calc",
    ";=1+1",
    "\uff1d1+1",  # full-width =
    "\uff0bcmd",  # full-width +
    "\uff0d2+3",  # full-width -
    "\uff20SUM(1)",  # full-width @
    "\u200b=1+1",  # zero-width space
    "\ufeff@SUM(1)",  # byte-order mark
    " \t\r\n\x0b\x0c\u00a0\u3000+1",
    "\x1f-1+1",
    "\t=1+1",
    "=HYPERLINK(1)",
]
PLAIN = ["hello", " hello", "\nplain text", "a=1+1", "", "  ", "\x00"]


def _written(value: str) -> str:
    buf = io.BytesIO()
    exports.write([[{"session_id": value, "trace_id": "t"}]], "traces", "csv", buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue().decode("utf-8"), newline="")))
    return rows[0]["session_id"]


@pytest.mark.parametrize("value", ATTACKS)
def test_a_formula_behind_blanks_or_in_full_width_is_neutralised(value: str) -> None:
    assert _written(value) == "'" + value


@pytest.mark.parametrize("value", PLAIN)
def test_plain_text_is_written_as_it_came(value: str) -> None:
    assert exports.csv_cell(value) == value


def test_numbers_stay_numbers() -> None:
    assert exports.csv_cell(-1.5) == -1.5
    assert exports.csv_cell(-3) == -3
