"""Settings of ``driftline dashboard`` (pydantic-settings, env prefix ``DRIFTLINE_``).

Built by the entry points (the click command, then each run of the Streamlit script); nothing
reads the environment at import time.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from collector.errors import ConfigError
from collector.settings import DEFAULT_DATABASE_URL, ENV_PREFIX, describe_validation_error


class DashboardSettings(BaseSettings):
    """Configuration of the dashboard; every field is ``DRIFTLINE_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    database_url: str = Field(
        DEFAULT_DATABASE_URL, description="The collector's store (SQLAlchemy URL)."
    )
    dashboard_host: str = Field("127.0.0.1", description="Bind address of the dashboard.")
    dashboard_port: int = Field(8501, ge=1, le=65535, description="Dashboard HTTP port.")
    dashboard_dev: bool = Field(
        False, description="No login: every tenant is visible and every action allowed."
    )
    egress_allow: str = Field(
        "",
        description="Where the Capacity page's gateway URL may point besides public addresses "
        "(same syntax as the collector's DRIFTLINE_EGRESS_ALLOW, e.g. `127.0.0.1:8000`).",
    )

    @field_validator("egress_allow")
    @classmethod
    def _egress_allow_parses(cls, v: str) -> str:
        from collector.egress import EgressPolicy

        EgressPolicy.parse(v)  # ValueError names the entry
        return v

    @field_validator("database_url")
    @classmethod
    def _known_dialect(cls, v: str) -> str:
        if not (v.startswith("sqlite") or v.startswith("postgresql")):
            raise ValueError("must start with sqlite:// or postgresql+psycopg://")
        return v


def load_dashboard_settings(**overrides: Any) -> DashboardSettings:
    """Explicit overrides, then the environment, then defaults.

    Raises:
        ConfigError: an invalid value (the message names the ``DRIFTLINE_*`` variable), or
            ``dashboard_dev`` with a non-loopback ``dashboard_host``.
    """
    try:
        s = DashboardSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None
    from collector.settings import is_loopback

    if s.dashboard_dev and not is_loopback(s.dashboard_host):
        raise ConfigError(
            "DRIFTLINE_DASHBOARD_HOST: --dev has no login and binds loopback only, "
            f"got {s.dashboard_host!r}"
        )
    return s
