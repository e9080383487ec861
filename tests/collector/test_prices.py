"""Price table: name normalisation, the user file format, the cost formula."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.cost.calls import call_cost
from collector.cost.prices import (
    ModelPrice,
    PriceTable,
    input_is_exclusive,
    normalize_model_name,
    token_cost,
)
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


def test_cache_counts_above_input_mean_input_is_exclusive() -> None:
    """Anthropic reports ``input_tokens`` exclusive of cache reads and writes: 50 uncached input
    tokens with 2,000 cache reads and 300 cache writes cost all three, nothing clipped to 0."""
    p = ModelPrice(input=3.0, output=15.0, cache_read_input=0.3, cache_write_input=3.75)
    assert input_is_exclusive(50, 2000, 300) and not input_is_exclusive(2300, 2000, 300)
    assert token_cost(p, 50, 10, 2000, 300) == pytest.approx(
        (50 * 3.0 + 2000 * 0.3 + 300 * 3.75 + 10 * 15.0) / 1e6
    )
    cost, flags = call_cost(
        p,
        operation="chat",
        input_tokens=50,
        output_tokens=10,
        cached_input_tokens=2000,
        cache_write_input_tokens=300,
    )
    assert cost == pytest.approx(token_cost(p, 50, 10, 2000, 300))
    assert flags == {"input_exclusive_of_cache"}


def test_reasoning_tokens_priced_inside_or_on_top_of_output() -> None:
    p = ModelPrice(input=1.0, output=4.0, reasoning_output=8.0)
    # inclusive (OpenAI: completion_tokens includes reasoning): 100 output of which 60 reasoning
    assert token_cost(p, 0, 100, reasoning_output_tokens=60) == pytest.approx(
        (40 * 4.0 + 60 * 8.0) / 1e6
    )
    # reasoning above output: reported apart, billed on top
    assert token_cost(p, 0, 10, reasoning_output_tokens=60) == pytest.approx(
        (10 * 4.0 + 60 * 8.0) / 1e6
    )
    # no reasoning price: the output price
    assert token_cost(ModelPrice(1.0, 4.0), 0, 100, reasoning_output_tokens=60) == pytest.approx(
        400 / 1e6
    )


@pytest.mark.parametrize(
    ("reported", "inp", "out", "cost", "flags"),
    [
        (0.0, 10, 5, None, {"unpriced", "reported_cost_ignored"}),
        (0.0, 0, 0, 0.0, {"cost_reported"}),
        (0.25, 10, 5, 0.25, {"cost_reported"}),
        (None, 10, 5, None, {"unpriced"}),
        (None, None, 5, None, {"unpriced", "usage_missing"}),
    ],
)
def test_reported_cost_of_an_unpriced_model(
    reported: float | None, inp: int | None, out: int, cost: float | None, flags: set[str]
) -> None:
    got = call_cost(
        None, operation="chat", input_tokens=inp, output_tokens=out, reported_cost_usd=reported
    )
    assert got == (cost, flags)
