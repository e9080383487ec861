"""Generate the configuration reference (docs/configuration.md) from the settings models.

    python -m collector.configref > docs/configuration.md

A test keeps the committed file equal to this output.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic_settings import BaseSettings

#: (title, "module:Class") of every deployable's settings.
SETTINGS: list[tuple[str, str]] = [
    ("Collector (`driftline collector`)", "collector.settings:Settings"),
    ("Alerts", "collector.alerts.receivers:AlertSettings"),
    ("Judges (`driftline judge run`, collector job)", "judges.settings:JudgeSettings"),
    ("Drift (`driftline drift run`, collector job)", "drift.runs:DriftSettings"),
    ("Canary (collector job)", "drift.canary_jobs:CanarySettings"),
    ("vLLM engine (`driftline serving up`)", "serving.settings:EngineSettings"),
    ("Gateway (`driftline gateway`)", "serving.settings:GatewaySettings"),
    ("Dashboard (`driftline dashboard`)", "dashboard.settings:DashboardSettings"),
]


def _default(field: Any) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "–"
    else:
        value = field.default
    if value is None or str(value) == "PydanticUndefined":
        return "–"
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    text = str(value)
    return f"`{text}`" if text else '`""`'


def render() -> str:
    """Markdown tables: variable, type, default, description, per settings class."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the settings models by `python -m collector.configref`; do not edit.",
        "Every variable can also be passed as a command-line option where one exists.",
        "Bad values fail at start-up with a message naming the variable.",
        "",
    ]
    for title, ref in SETTINGS:
        module, attr = ref.split(":")
        cls: type[BaseSettings] = getattr(importlib.import_module(module), attr)
        prefix = cls.model_config.get("env_prefix", "")
        lines += [f"## {title}", "", "| variable | type | default | meaning |", "|---|---|---|---|"]
        for name, field in cls.model_fields.items():
            typ = str(field.annotation).replace("typing.", "").replace("<class '", "")
            typ = typ.replace("'>", "").replace("|", "or")
            desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| `{(prefix + name).upper()}` | {typ} | {_default(field).replace('|', '/')} "
                f"| {desc} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
