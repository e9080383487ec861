"""The engine's dtype from the CPU's features: bfloat16 only where the CPU computes it natively.

bfloat16 arithmetic is native on x86 with AVX-512 BF16 (``avx512_bf16``) or AMX (``amx_bf16``);
a CPU without them (e.g. an AVX2-only AMD EPYC) converts to float32 around every operation, so
bf16 buys nothing there but the conversions (a 2-core EPYC served the demo at p95 TTFT 15-56 s
in bf16, issue 17). Without those flags the engine runs float32. An explicitly set dtype
(``DRIFTLINE_DTYPE``) always wins; on a GPU the configured default stays.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: CPU flags (as /proc/cpuinfo spells them) that give native bfloat16 arithmetic
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The feature flags of the first CPU listed in ``cpuinfo`` (Linux); empty when the file is
    absent or has no ``flags`` line (other systems)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def dtype_for_cpu(flags: Iterable[str]) -> tuple[str, str]:
    """``(dtype, reason)``: ``bfloat16`` when ``flags`` include a native bf16 flag
    (:data:`NATIVE_BF16_FLAGS`), else ``float32``; the reason names the flags seen."""
    native = sorted(NATIVE_BF16_FLAGS & set(flags))
    if native:
        return "bfloat16", f"the CPU has native bf16 ({', '.join(native)})"
    return "float32", "the CPU has no native bf16 (no avx512_bf16 / amx_bf16): bf16 is emulated"


def engine_dtype(
    explicit: str | None, default: str, *, gpu: bool, flags: Iterable[str] | None = None
) -> tuple[str, str]:
    """``(dtype, reason)`` to launch with: ``explicit`` when the user set one; on a GPU the
    configured ``default``; on a CPU :func:`dtype_for_cpu` of ``flags`` (default: this
    machine's :func:`cpu_flags`)."""
    if explicit:
        return explicit, "set by DRIFTLINE_DTYPE"
    if gpu:
        return default, "GPU"
    return dtype_for_cpu(cpu_flags() if flags is None else flags)
