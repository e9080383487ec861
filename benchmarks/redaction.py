"""CPU cost of redaction: ``prepare`` per ordinary span, and the adversarial inputs of issue 35.

* ``prepare``: ``collector.ingest.prepare.prepare(spans, 1_000_000, "redacted")`` on the spans
  of ``benchmarks/ingest.py`` (~1 KB of message text each) and of ``benchmarks/ingest_load.py``
  (the ``vs_phoenix`` load: ~3 KB spans, PII in some), timed with ``time.process_time``, best
  of ``--repeat``.
* ``adversarial``: ``redact`` on each input family of ``tests/collector/test_redaction_linear.py``
  at ``--sizes`` characters: milliseconds and the time per character relative to the smallest
  size (linear: ~1; quadratic: grows with the size).

    python benchmarks/redaction.py                         # both
    python benchmarks/redaction.py --only prepare --repeat 5

Prints ``RESULT redaction_prepare_us_per_span_<corpus>=<x> us`` and
``RESULT redaction_adversarial_<family>_ms_per_64k=<x> ms``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.ingest import decode as codec
from collector.ingest.prepare import prepare
from collector.ingest.redaction import redact

#: the adversarial families (same as the linear-time test): name -> text of about n characters
FAMILIES = {
    "key_value": lambda n: "token=abc " + ".token" * (n // 6),
    "email_local": lambda n: "a!" * (n // 2) + "@",
    "email_domain": lambda n: "x@" + "a1." * (n // 3),
    "pem_begins": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "jwt_runs": lambda n: "eyJ-" * (n // 4),
    "bearer_spaces": lambda n: "bearer " + " " * n + "x",
    "ipv6_zone": lambda n: "1:1:%" + "a" * n + ":",
    "card_digits": lambda n: "1 " * (n // 2),
    "phones": lambda n: "415 555 0132 " * (n // 13),
}


def _bodies(corpus: str) -> list[bytes]:
    if corpus == "ingest":
        from benchmarks.ingest import build_bodies

        return build_bodies(20, 100, 7)
    import numpy as np

    from benchmarks.ingest_load import build_bodies as load_bodies

    return load_bodies(20, np.random.default_rng(7))


def bench_prepare(repeat: int) -> None:
    for corpus in ("ingest", "load"):
        batches = [codec.decode(b, codec.PROTOBUF) for b in _bodies(corpus)]
        n = sum(len(b.spans) for b in batches)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            for b in batches:
                prepare(b.spans, 1_000_000, "redacted")
            best = min(best, time.process_time() - t0)
        print(f"RESULT redaction_prepare_us_per_span_{corpus}={best / n * 1e6:.1f} us ({n} spans)")


def bench_adversarial(sizes: list[int], limit_s: float) -> None:
    for name, make in FAMILIES.items():
        per_char = []
        for n in sizes:
            text = make(n)
            t0 = time.process_time()
            redact(text)
            dt = time.process_time() - t0
            per_char.append(dt / len(text))
            if dt > limit_s:
                break
        ratio = per_char[-1] / per_char[0]
        done = sizes[len(per_char) - 1]
        print(
            f"RESULT redaction_adversarial_{name}_ms_per_64k={per_char[-1] * 65536e3:.1f} ms "
            f"(at {done} chars; per-char time x{ratio:.1f} of {sizes[0]} chars)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["prepare", "adversarial"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1000,4000,16000,64000")
    ap.add_argument("--limit-s", type=float, default=5.0, help="stop a family past this time")
    args = ap.parse_args()
    if args.only in (None, "prepare"):
        bench_prepare(args.repeat)
    if args.only in (None, "adversarial"):
        bench_adversarial([int(s) for s in args.sizes.split(",")], args.limit_s)


if __name__ == "__main__":
    main()
