"""Settings of the serving tier (pydantic-settings, env prefix ``DRIFTLINE_``).

Two deployables: the vLLM engine launched by ``driftline serving up`` (:class:`EngineSettings`)
and the gateway ``driftline gateway`` (:class:`GatewaySettings`). Nothing reads the environment
at import time; entry points call :func:`load_engine_settings` / :func:`load_gateway_settings`
and pass the objects down, tests build them directly. Durations are seconds, sizes bytes or GiB
as named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from serving.errors import ServingError

ENV_PREFIX = "DRIFTLINE_"
DEFAULT_STATE_DIR = Path(".driftline")
DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
DEMO_ADAPTERS: tuple[str, ...] = ("candidate-good", "candidate-bad")

OtlpProtocol = Literal["grpc", "http/protobuf"]


class ServingConfigError(ServingError, ValueError):
    """Invalid serving configuration; the message names the ``DRIFTLINE_*`` variable."""


class EngineSettings(BaseSettings):
    """Configuration of the vLLM engine (``driftline serving up``); env ``DRIFTLINE_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    state_dir: Path = Field(
        default=DEFAULT_STATE_DIR, description="Serving venv, models and vLLM cache."
    )
    serving_venv: Path | None = Field(
        default=None, description="Serving virtual environment (default <state_dir>/vllm-venv)."
    )
    model_path: Path | None = Field(
        default=None,
        description="Hugging Face model folder (default: the prepared SmolLM2 folder).",
    )
    served_model_name: str = Field(
        default=DEFAULT_MODEL_NAME, description="Name of the base model in the API."
    )
    engine_host: str = Field(default="127.0.0.1", description="Bind address of vLLM.")
    engine_port: int = Field(default=8100, ge=1, le=65535, description="vLLM HTTP port.")
    otlp_traces_endpoint: str | None = Field(
        default="http://127.0.0.1:4317",
        description="Collector OTLP endpoint for vLLM spans (None disables tracing).",
    )
    otlp_protocol: OtlpProtocol = Field(
        default="grpc",
        description="grpc (endpoint host:4317) or http/protobuf (full URL /v1/traces).",
    )
    lora_adapters: dict[str, Path] = Field(
        default_factory=dict,
        description='LoRA adapters {"name": "/peft/dir"}; default: the prepared demo adapters.',
    )
    enable_lora: bool = Field(default=True, description="Serve LoRA adapters (--enable-lora).")
    max_lora_rank: int = Field(default=8, description="--max-lora-rank (1, 8, 16, 32, 64, ...).")
    max_loras: int = Field(default=2, ge=1, description="Adapters in one batch (--max-loras).")
    max_model_len: int = Field(default=2048, gt=0, description="Context length in tokens.")
    dtype: str = Field(default="bfloat16", description="--dtype")
    enforce_eager: bool = Field(
        default=True, description="--enforce-eager (CPU start-up is faster)."
    )
    prefix_caching: bool = Field(default=True, description="--enable-prefix-caching")
    structured_output_whitespace: bool = Field(
        default=False,
        description=(
            "Allow free whitespace inside JSON-schema constrained output; False passes "
            "--structured-outputs-config disable_any_whitespace (small judges otherwise pad "
            "with blanks until max_tokens)."
        ),
    )
    cpu_kv_cache_gib: int = Field(
        default=1, gt=0, description="VLLM_CPU_KVCACHE_SPACE on CPU (GiB)."
    )
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1, description="GPU only.")
    device: Literal["auto", "cpu", "gpu"] = Field(
        default="auto", description="auto: GPU if nvidia-smi sees one."
    )
    startup_timeout_s: float = Field(default=300.0, gt=0, description="Wait this long for /health.")

    @field_validator("max_lora_rank")
    @classmethod
    def _rank_allowed(cls, v: int) -> int:
        if v not in (1, 8, 16, 32, 64, 128, 256, 320, 512):
            raise ValueError("must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512")
        return v

    @property
    def venv_dir(self) -> Path:
        """The serving virtual environment."""
        return self.serving_venv or self.state_dir / "vllm-venv"

    @property
    def models_dir(self) -> Path:
        """Cache folder of converted models and adapters."""
        return self.state_dir / "models"


class GatewaySettings(BaseSettings):
    """Configuration of ``driftline gateway``; env ``DRIFTLINE_<FIELD>``.

    Rollouts, variant weights and API keys come from the config file (:mod:`serving.config`);
    these settings are the process knobs.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    gateway_host: str = Field(default="127.0.0.1", description="Bind address of the gateway.")
    gateway_port: int = Field(default=8000, ge=0, le=65535, description="Gateway HTTP port.")
    engine_url: str = Field(
        default="http://127.0.0.1:8100", description="OpenAI-compatible engine base URL."
    )
    collector_url: str | None = Field(
        default="http://127.0.0.1:4318", description="Collector REST base URL (rollout weights)."
    )
    gateway_config: Path | None = Field(
        default=None, description="YAML/TOML rollouts + API keys file."
    )
    gateway_otlp_endpoint: str | None = Field(
        default="http://127.0.0.1:4318/v1/traces",
        description="Where gateway spans go (None: no export).",
    )
    gateway_otlp_protocol: OtlpProtocol = Field(
        default="http/protobuf", description="Span exporter protocol."
    )
    collector_api_key: SecretStr | None = Field(
        default=None,
        description="Sent as `Authorization: Bearer` on span export (collector tenant).",
    )
    max_concurrency: int = Field(default=64, gt=0, description="Requests in flight to the engine.")
    max_queue: int = Field(default=256, ge=0, description="Requests waiting for a slot before 429.")
    retry_after_s: int = Field(default=1, ge=1, description="Retry-After header on 429 (seconds).")
    max_output_tokens: int = Field(default=1024, gt=0, description="Server-side cap on max_tokens.")
    gateway_max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        gt=0,
        description="Largest request body the gateway reads: HTTP 413 as soon as Content-Length "
        "or the streamed body passes it (checked after the API key, before parsing).",
    )
    weights_ttl_s: float = Field(
        default=5.0, gt=0, description="Rollout weights cache TTL (seconds)."
    )
    engine_timeout_s: float = Field(
        default=300.0, gt=0, description="Read timeout towards the engine."
    )
    engine_keepalive_s: float = Field(
        default=4.0,
        gt=0,
        description="Idle connections to the replicas are reused this long (seconds); keep it "
        "below the engines' own keep-alive (uvicorn/vLLM: 5 s) so a closing one is never reused.",
    )
    health_interval_s: float = Field(
        default=2.0, gt=0, description="Replica /health + /metrics poll period (seconds)."
    )
    gateway_capture_content: bool = Field(
        default=True, description="Put prompts/outputs on spans (gen_ai.input/output.messages)."
    )
    service_name: str = Field(
        default="driftline-gateway", description="OTel resource service.name."
    )

    @field_validator("engine_url", "collector_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/") if v else v


_S = TypeVar("_S", bound=BaseSettings)


def _load(cls: type[_S], overrides: dict[str, Any]) -> _S:
    try:
        return cls(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "?"
            lines.append(f"{ENV_PREFIX}{field.upper()}: {err['msg']} (got {err.get('input')!r})")
        raise ServingConfigError("invalid configuration: " + "; ".join(lines)) from None


def load_engine_settings(**overrides: Any) -> EngineSettings:
    """Explicit overrides → environment → defaults.

    Raises:
        ServingConfigError: a value is invalid; the message names the variable.
    """
    return _load(EngineSettings, overrides)


def load_gateway_settings(**overrides: Any) -> GatewaySettings:
    """Explicit overrides → environment → defaults.

    Raises:
        ServingConfigError: a value is invalid; the message names the variable.
    """
    return _load(GatewaySettings, overrides)
