"""Price table: name normalisation, the user file format, the cost formula."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.cost.prices import ModelPrice, PriceTable, normalize_model_name, token_cost
from collector.errors import ConfigError
from tests.conftest import PRICE_FIXTURE


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("openai/gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("anthropic/claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("acme-finetune-v3", "acme-finetune-v3"),
        ("GPT-4o", "gpt-4o"),
    ],
)
def test_normalize_model_name(raw: str, norm: str) -> None:
    assert normalize_model_name(raw) == norm


def test_prefix_is_never_a_match() -> None:
    table = PriceTable.load(PRICE_FIXTURE)
    name, price = table.lookup("gpt-4o-mini-2024-07-18")
    assert name == "gpt-4o-mini" and price is not None and price.input == 0.15
    assert table.lookup("gpt-4o-audio")[1] is None
    assert table.lookup(None, "", "acme")[0] == "acme"


def test_shipped_table_and_user_override(tmp_path: Path) -> None:
    shipped = PriceTable.load()
    assert "gpt-4.1-mini" in shipped and "claude-sonnet-4" in shipped
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"my-lora": {"input": 0.01, "output": 0.02}}))
    table = PriceTable.load(f)
    assert table.lookup("my-lora")[1] == ModelPrice(0.01, 0.02)
    assert "gpt-4o" in table  # shipped entries stay


@pytest.mark.parametrize(
    "doc",
    [
        [1],
        {"models": {"m": {"input": 1}}},
        {"models": {"m": {"input": -1, "output": 1}}},
        {"models": {"m": "cheap"}},
    ],
)
def test_bad_user_file_names_the_variable(tmp_path: Path, doc: object) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="DRIFTLINE_PRICES"):
        PriceTable.load(f)


def test_cost_formula_cache_read_and_write() -> None:
    p = ModelPrice(input=3.0, output=15.0, cache_read_input=0.3, cache_write_input=3.75)
    # 1000 input of which 600 cache reads and 100 cache writes; 200 output
    assert token_cost(p, 1000, 200, 600, 100) == pytest.approx(
        (300 * 3.0 + 600 * 0.3 + 100 * 3.75 + 200 * 15.0) / 1e6
    )
    # no cache price: cached tokens fall back to the input price
    assert token_cost(ModelPrice(1.0, 2.0), 10, 10, 5) == pytest.approx(30 / 1e6)
