"""Generate the configuration reference (docs/configuration.md) from the settings models.

    python -m driftline.configref > docs/configuration.md

A test keeps the committed file equal to this output.
"""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings

from alerts.receivers import AlertSettings
from collector.settings import Settings
from dashboard.settings import DashboardSettings
from drift.canary.jobs import CanarySettings
from drift.runs import DriftSettings
from judges.settings import JudgeSettings
from serving.settings import EngineSettings, GatewaySettings

#: (title, settings class) of every deployable.
SETTINGS: list[tuple[str, type[BaseSettings]]] = [
    ("Collector (`driftline collector`)", Settings),
    ("Alerts", AlertSettings),
    ("Judges (`driftline judge run`, collector job)", JudgeSettings),
    ("Drift (`driftline drift run`, collector job)", DriftSettings),
    ("Canary (collector job)", CanarySettings),
    ("vLLM engine (`driftline serving up`)", EngineSettings),
    ("Gateway (`driftline gateway`)", GatewaySettings),
    ("Dashboard (`driftline dashboard`)", DashboardSettings),
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
        "Generated from the settings models by `python -m driftline.configref`; do not edit.",
        "Every variable can also be passed as a command-line option where one exists.",
        "Bad values fail at start-up with a message naming the variable.",
        "",
    ]
    for title, cls in SETTINGS:
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
