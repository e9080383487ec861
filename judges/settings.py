"""Settings of the judge worker and job (pydantic-settings, env prefix ``DRIFTLINE_JUDGE_``).

Built by entry points (``driftline judge run``, the collector's job factory) and passed down;
nothing reads the environment at import time. Durations are seconds, money USD.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from collector.errors import ConfigError
from judges.errors import JudgeError, RubricError
from judges.rubrics import Rubric
from judges.sampling import DailyBudget, SamplingPolicy, StratumRate
from judges.transport import JudgePrice
from judges.user_rubrics import all_rubrics

ENV_PREFIX = "DRIFTLINE_JUDGE_"


class JudgeConfigError(JudgeError, ConfigError):
    """Invalid judge configuration; the message names the ``DRIFTLINE_JUDGE_*`` variable.

    A :class:`~collector.errors.ConfigError` too, so the CLI prints it in one line (exit 2)."""


class JudgeSettings(BaseSettings):
    """Configuration of LLM-as-judge scoring; every field is ``DRIFTLINE_JUDGE_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    enabled: bool = Field(default=True, description="Run the judge job inside the collector.")
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint, e.g. .../v1."
    )
    api_key: SecretStr = Field(
        default=SecretStr("EMPTY"), description="Bearer key of the judge API."
    )
    model: str | None = Field(default=None, description="Judge model name sent to the endpoint.")
    rubrics: tuple[str, ...] = Field(
        default=("helpfulness",), description="Rubric names (shipped or from rubric_dir)."
    )
    rubric_dir: Path | None = Field(
        default=None, description="Folder of user rubrics (*.yaml, *.yml, *.toml)."
    )
    base_rate: float = Field(default=0.05, ge=0.0, le=1.0, description="Share of calls judged.")
    strata: tuple[StratumRate, ...] = Field(default=(), description="JSON list of stratum rates.")
    candidate_rate: float | None = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Minimum rate for candidate arms of running rollouts.",
    )
    salt: str = Field(default="driftline-judge", min_length=1, description="Sampling hash salt.")
    daily_max_calls: int | None = Field(default=None, ge=0, description="Calls judged per UTC day.")
    daily_max_usd: float | None = Field(default=None, ge=0.0, description="Judge USD per UTC day.")
    cost_per_judgement_usd: float | None = Field(
        default=None, gt=0.0, description="Estimated USD of judging one call (all rubrics)."
    )
    input_usd_per_mtok: float | None = Field(default=None, ge=0.0, description="Judge input price.")
    output_usd_per_mtok: float | None = Field(
        default=None, ge=0.0, description="Judge output price."
    )
    concurrency: int = Field(default=4, ge=1, le=256, description="Judge requests in flight.")
    batch_size: int = Field(default=64, ge=1, description="Samples claimed per round.")
    lease_s: float = Field(default=300.0, gt=0, description="A claim expires after this long.")
    sample_timeout_s: float = Field(
        default=240.0,
        gt=0,
        description=(
            "Most seconds one sample may take, all retries included (< lease_s); a sample whose "
            "lease would run out before its turn goes back to the queue unjudged."
        ),
    )
    max_attempts: int = Field(
        default=3, ge=1, description="Tries per sample on unavailable judges."
    )
    settle_s: float = Field(
        default=30.0,
        ge=0.0,
        description="Calls received less than this long ago wait (late merges).",
    )
    select_limit: int = Field(default=5000, ge=1, description="New calls considered per round.")
    flag_lookback_s: float = Field(
        default=7 * 86400.0, gt=0, description="Thumbs-down / escalations this recent are judged."
    )
    audit_rate: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Share of judged calls in the human audit subset."
    )
    audit_strata: tuple[StratumRate, ...] = Field(
        default=(), description="Per-stratum audit rates."
    )
    low_score_threshold: float | None = Field(
        default=2.0, description="Judged calls at or below this score go to the review queue."
    )
    review_lease_s: float = Field(
        default=900.0, gt=0, description="A reviewer's claim lasts this long."
    )
    interval_s: float = Field(default=30.0, gt=0, description="Judge job period.")
    drift_interval_s: float = Field(default=3600.0, gt=0, description="Judge-drift check period.")
    drift_window_s: float = Field(
        default=7 * 86400.0, gt=0, description="Judge-drift window length."
    )
    drift_threshold: float = Field(default=0.05, gt=0.0, lt=1.0, description="Judge-drift p-value.")
    drift_min_samples: int = Field(default=30, ge=2, description="Labels per window for a verdict.")
    timeout_s: float = Field(default=60.0, gt=0, description="Per-request judge timeout.")
    max_tokens: int = Field(
        default=1024, ge=16, description="Judge output token limit per request."
    )
    reasoning_max_chars: int | None = Field(
        default=None,
        ge=20,
        description=(
            "Cap on the verdict's reasoning (JSON-schema maxLength + prompt); small judges "
            "otherwise ramble into max_tokens. None: no cap."
        ),
    )

    @model_validator(mode="after")
    def _consistent(self) -> JudgeSettings:
        if self.daily_max_usd is not None and self.cost_per_judgement_usd is None:
            raise ValueError(
                "DRIFTLINE_JUDGE_DAILY_MAX_USD needs DRIFTLINE_JUDGE_COST_PER_JUDGEMENT_USD"
            )
        if (self.input_usd_per_mtok is None) != (self.output_usd_per_mtok is None):
            raise ValueError("set both DRIFTLINE_JUDGE_INPUT_/OUTPUT_USD_PER_MTOK or neither")
        if not self.rubrics:
            raise ValueError("DRIFTLINE_JUDGE_RUBRICS must name at least one rubric")
        if self.sample_timeout_s >= self.lease_s:
            raise ValueError(
                f"DRIFTLINE_JUDGE_SAMPLE_TIMEOUT_S ({self.sample_timeout_s:g} s) must be below "
                f"DRIFTLINE_JUDGE_LEASE_S ({self.lease_s:g} s): a sample must finish in its lease"
            )
        known = self.all_rubrics()  # RubricError names a bad file of DRIFTLINE_JUDGE_RUBRIC_DIR
        unknown = [r for r in self.rubrics if r not in known]
        if unknown:
            raise ValueError(
                f"DRIFTLINE_JUDGE_RUBRICS names unknown rubrics {unknown}; known: {sorted(known)}"
                + ("" if self.rubric_dir else " (set DRIFTLINE_JUDGE_RUBRIC_DIR for your own)")
            )
        return self

    def all_rubrics(self) -> dict[str, Rubric]:
        """Shipped rubrics plus those of ``rubric_dir``, by name (RubricError on a bad file)."""
        return all_rubrics(self.rubric_dir)

    def rubric(self, name: str) -> Rubric:
        """One rubric by name, shipped or from ``rubric_dir``; RubricError when unknown."""
        known = self.all_rubrics()
        if name not in known:
            raise RubricError(f"unknown rubric {name!r}; known: {sorted(known)}")
        return known[name]

    def sampling_policy(self) -> SamplingPolicy:
        """The judge sampling policy (flagged calls always judged)."""
        budget = None
        if self.daily_max_calls is not None or self.daily_max_usd is not None:
            budget = DailyBudget(
                max_calls=self.daily_max_calls,
                max_usd=self.daily_max_usd,
                cost_per_judgement_usd=self.cost_per_judgement_usd,
            )
        return SamplingPolicy(
            base_rate=self.base_rate,
            strata=self.strata,
            candidate_rate=self.candidate_rate,
            salt=self.salt,
            budget=budget,
        )

    def audit_policy(self) -> SamplingPolicy:
        """The human-audit design among judged calls: same hashing, an independent salt."""
        return SamplingPolicy(
            base_rate=self.audit_rate,
            strata=self.audit_strata,
            always_sample_flagged=False,
            salt=f"{self.salt}:audit",
        )

    def price(self) -> JudgePrice | None:
        """The judge model's price, or None when not configured (cost then unknown)."""
        if self.input_usd_per_mtok is None or self.output_usd_per_mtok is None:
            return None
        return JudgePrice(self.input_usd_per_mtok, self.output_usd_per_mtok)

    def require_endpoint(self) -> tuple[str, str]:
        """(base_url, model); raises JudgeConfigError naming the missing variable."""
        if not self.base_url:
            raise JudgeConfigError("DRIFTLINE_JUDGE_BASE_URL is not set")
        if not self.model:
            raise JudgeConfigError("DRIFTLINE_JUDGE_MODEL is not set")
        return self.base_url, self.model


def load_judge_settings(**overrides: object) -> JudgeSettings:
    """Explicit overrides (None ignored), then the environment, then defaults.

    Raises JudgeConfigError naming the ``DRIFTLINE_JUDGE_*`` variable of an invalid value.
    """
    try:
        return JudgeSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except RubricError as exc:  # a bad file of DRIFTLINE_JUDGE_RUBRIC_DIR, named in the message
        raise JudgeConfigError(f"DRIFTLINE_JUDGE_RUBRIC_DIR: {exc}") from None
    except SettingsError as exc:  # e.g. DRIFTLINE_JUDGE_RUBRICS=helpfulness (not JSON)
        raise JudgeConfigError(
            f'judge settings: {exc}; lists are JSON, e.g. \'["a", "b"]\''
        ) from None
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            field = "_".join(str(p) for p in err["loc"]).upper()
            name = f"{ENV_PREFIX}{field}" if field else "judge settings"
            parts.append(f"{name}: {err['msg'].removeprefix('Value error, ')}")
        raise JudgeConfigError("; ".join(parts)) from None
