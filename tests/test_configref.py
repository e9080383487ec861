"""docs/configuration.md is generated from the settings models and kept current."""

from __future__ import annotations

from pathlib import Path

from driftline.configref import render


def test_configuration_reference_is_current() -> None:
    committed = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    assert committed == render(), "run: python -m driftline.configref > docs/configuration.md"
    assert "DRIFTLINE_DATABASE_URL" in committed and "DRIFTLINE_JUDGE_BASE_URL" in committed
