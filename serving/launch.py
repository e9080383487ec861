"""vLLM launch arguments as a pure function of :class:`~serving.settings.EngineSettings`.

:func:`build_launch` decides *what* to run (argv + environment); :mod:`serving.engine` runs it.
Flags and environment variables follow ``reference/vllm-cpu.md`` (CPU build, tracing, LoRA) and
``reference/otel-genai-otlp-webhooks.md`` §3.1 (``--otlp-traces-endpoint``,
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``) and §6 (``--enable-lora --lora-modules``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from serving.settings import DEMO_ADAPTERS, EngineSettings

#: Entry module started with ``python -m``: works for the ``vllm-cpu`` distribution even without
#: the dist-info alias (repair 2 in ``reference/vllm-cpu.md``).
VLLM_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class LaunchSpec:
    """A process to start.

    Attributes:
        argv: full command line, ``argv[0]`` is the serving venv's python.
        env: variables to set on top of the inherited environment.
        url: base URL of the OpenAI-compatible API once it is up (no trailing slash).
        device: ``cpu`` or ``gpu``.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    device: str = "cpu"


def default_model_dir(settings: EngineSettings) -> Path:
    """Folder that ``driftline serving prepare-model`` writes the base model to."""
    return settings.models_dir / settings.served_model_name


def default_adapters(settings: EngineSettings) -> dict[str, Path]:
    """The demo LoRA adapters written by ``prepare-model``: name -> PEFT folder."""
    return {name: settings.models_dir / "adapters" / name for name in DEMO_ADAPTERS}


def build_launch(settings: EngineSettings, *, gpu: bool, python: Path | None = None) -> LaunchSpec:
    """Build the vLLM command line and environment for ``settings``.

    Args:
        settings: engine configuration.
        gpu: True for the CUDA build (``vllm``), False for ``vllm-cpu``.
        python: interpreter of the serving venv (default ``<venv>/bin/python``).

    Returns:
        A :class:`LaunchSpec`. Pure: reads no files and no environment.

    Raises:
        ValueError: ``settings.otlp_traces_endpoint`` does not fit ``settings.otlp_protocol``
            (``http/protobuf`` needs the full ``.../v1/traces`` URL, §3.1).
    """
    py = python or settings.venv_dir / "bin" / "python"
    model = settings.model_path or default_model_dir(settings)
    adapters: dict[str, Path] = {}
    if settings.enable_lora:
        adapters = dict(settings.lora_adapters) or default_adapters(settings)
    argv: list[str] = [
        str(py),
        "-m",
        VLLM_API_SERVER_MODULE,
        "--model",
        str(model),
        "--served-model-name",
        settings.served_model_name,
        "--host",
        settings.engine_host,
        "--port",
        str(settings.engine_port),
        "--max-model-len",
        str(settings.max_model_len),
        "--dtype",
        settings.dtype,
    ]
    argv.append(
        "--enable-prefix-caching" if settings.prefix_caching else "--no-enable-prefix-caching"
    )
    if settings.enforce_eager:
        argv.append("--enforce-eager")
    if not settings.structured_output_whitespace:
        # JSON without free whitespace (xgrammar is vLLM's default backend; the option needs it)
        structured = {"backend": "xgrammar", "disable_any_whitespace": True}
        argv += ["--structured-outputs-config", json.dumps(structured, separators=(",", ":"))]
    if adapters:
        argv += [
            "--enable-lora",
            "--max-lora-rank",
            str(settings.max_lora_rank),
            "--max-loras",
            str(min(settings.max_loras, len(adapters))),
            "--lora-modules",
        ]
        # JSON form sets `parent` = base model in /v1/models (reference §6).
        argv += [
            json.dumps(
                {"name": name, "path": str(path), "base_model_name": settings.served_model_name},
                separators=(",", ":"),
            )
            for name, path in sorted(adapters.items())
        ]
    env: dict[str, str] = {
        "VLLM_CACHE_ROOT": str(settings.state_dir / "vllm-cache"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    if settings.otlp_traces_endpoint:
        endpoint = settings.otlp_traces_endpoint
        if settings.otlp_protocol == "http/protobuf" and not endpoint.rstrip("/").endswith(
            "/v1/traces"
        ):
            raise ValueError(
                "otlp_traces_endpoint: http/protobuf needs the full URL ending in /v1/traces"
            )
        argv += ["--otlp-traces-endpoint", endpoint]
        env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = settings.otlp_protocol
        env["OTEL_SERVICE_NAME"] = f"vllm-{settings.served_model_name}"
    if gpu:
        argv += ["--gpu-memory-utilization", str(settings.gpu_memory_utilization)]
    else:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(settings.cpu_kv_cache_gib)
        env["VLLM_TARGET_DEVICE"] = "cpu"
    url = f"http://{settings.engine_host}:{settings.engine_port}"
    return LaunchSpec(argv=tuple(argv), env=env, url=url, device="gpu" if gpu else "cpu")
