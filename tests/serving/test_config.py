"""Gateway config files (YAML and TOML) and their validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.config import GatewayConfigError, demo_config, load_config, parse_config


def test_yaml_and_toml_load_the_same_config(tmp_path: Path) -> None:
    y = tmp_path / "g.yaml"
    y.write_text(
        "default_rollout: bot\nrollouts:\n  bot:\n    variants: {base: 0.9, cand: 0.1}\n"
        "api_keys: {sk-1: acme}\n"
    )
    t = tmp_path / "g.toml"
    t.write_text(
        'default_rollout = "bot"\n[rollouts.bot.variants]\nbase = 0.9\ncand = 0.1\n'
        '[api_keys]\n"sk-1" = "acme"\n'
    )
    a, b = load_config(y), load_config(t)
    assert a == b
    assert dict(a.rollouts["bot"].weights) == {"base": 0.9, "cand": 0.1}
    assert a.api_keys == {"sk-1": "acme"} and a.variants == {"base", "cand"}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"rollouts": {"bot": {"variants": {"a": -1}}}}, "rollouts.bot.variants.a"),
        ({"rollouts": {"bot": {"variants": {"a": 0}}}}, "rollouts.bot.variants"),
        ({"rollouts": {"bot": {}}}, "rollouts.bot.variants"),
        ({"default_rollout": "nope"}, "default_rollout"),
        ({"colour": 1}, "unknown keys"),
        ({"api_keys": ["x"]}, "api_keys"),
    ],
)
def test_invalid_config_names_the_key(data: dict[str, object], needle: str) -> None:
    with pytest.raises(GatewayConfigError, match=needle):
        parse_config(data)


def test_bad_suffix_and_demo_config(tmp_path: Path) -> None:
    p = tmp_path / "g.json"
    p.write_text("{}")
    with pytest.raises(GatewayConfigError, match="gateway_config"):
        load_config(p)
    cfg = demo_config("base", "cand", 0.25)
    assert dict(cfg.rollouts["support-bot"].weights) == {"base": 0.75, "cand": 0.25}
    with pytest.raises(ValueError, match="share"):
        demo_config("base", share=1.5)
