"""serving/cpu.py: float32 on a CPU without native bf16, bf16 with it, an explicit dtype wins."""

from __future__ import annotations

from pathlib import Path

from serving.cpu import cpu_flags, dtype_for_cpu, engine_dtype

EPYC_AVX2 = "fpu vme sse4_2 avx avx2 fma bmi2"  # AMD EPYC 7xx2: no AVX-512
SAPPHIRE = "avx2 avx512f avx512_bf16 amx_bf16 amx_tile"


def test_flags_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {EPYC_AVX2}\n\nprocessor\t: 1\nflags\t: x\n")
    assert cpu_flags(info) == frozenset(EPYC_AVX2.split())
    assert cpu_flags(tmp_path / "absent") == frozenset()


def test_dtype_follows_native_bf16() -> None:
    dtype, why = dtype_for_cpu(EPYC_AVX2.split())
    assert dtype == "float32" and "emulated" in why
    dtype, why = dtype_for_cpu(SAPPHIRE.split())
    assert dtype == "bfloat16" and "amx_bf16" in why and "avx512_bf16" in why
    assert dtype_for_cpu(["avx512f", "avx512bw"])[0] == "float32"  # AVX-512 without BF16


def test_explicit_dtype_and_gpu_keep_theirs() -> None:
    assert engine_dtype("bfloat16", "bfloat16", gpu=False, flags=EPYC_AVX2.split())[0] == "bfloat16"
    assert engine_dtype(None, "bfloat16", gpu=True, flags=EPYC_AVX2.split())[0] == "bfloat16"
    assert engine_dtype(None, "bfloat16", gpu=False, flags=EPYC_AVX2.split())[0] == "float32"
