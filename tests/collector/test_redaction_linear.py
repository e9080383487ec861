"""Redaction runs in time linear in the length of its input, for adversarial inputs too
(issue 35: ``_KEY_VALUE`` was cubic on ``"token=abc " + ".token" * n``, ``_EMAIL`` quadratic on
``"a!" * n + "@"``; a 4 KB prompt held the collector for 24 s).

Timing on a loaded 2-core machine: every time is this process's CPU time (``time.process_time``,
not wall time, so other processes' load does not count), the least of a few runs, and each
call runs under a CPU-time cap (``SIGPROF``; ``re`` checks signals while it matches) so that a
super-linear pattern fails the test in seconds instead of hanging it. The assertion is on the
growth from a mid size to a size 16x larger: linear is ~16x, and the bound is 64x (quadratic
would be 256x, cubic 4096x), with a floor under the mid time so that timer noise on a
sub-millisecond run cannot fail it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from collector.ingest import redaction as r
from collector.ingest.redaction_budget import DEFAULT_CPU_S, OVER_BUDGET, record_budget

#: family -> text of about n characters. Each targets one pattern's weak spot on main before
#: the fix, or a shape that makes a backtracking pattern retry a long run.
FAMILIES: dict[str, Callable[[int], str]] = {
    "key_value_dots": lambda n: "token=abc " + ".token" * (n // 6),  # issue 35: cubic
    "key_value_dashes": lambda n: "x-" * (n // 2) + "token",
    "key_value_no_separator": lambda n: "password" + " " * n,
    "key_value_separators": lambda n: "token" + "=" * n,
    "email_local_bangs": lambda n: "a!" * (n // 2) + "@",  # issue 35: quadratic
    "email_domain_labels": lambda n: "x@" + "a1." * (n // 3),
    "email_many_near_misses": lambda n: ("a!" * 20 + "@" + "a1." * 30 + " ") * (n // 131),
    "pem_begin_lines": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "pem_long_header": lambda n: "-----BEGIN " + "A" * n,
    "jwt_dash_runs": lambda n: "eyJ-" * (n // 4),
    "jwt_chain": lambda n: "eyJaaaaaaaa." * (n // 12),
    "github_pat_run": lambda n: "github_pat_" * (n // 11),
    "stripe_underscores": lambda n: ("sk_live_" + "a" * 20 + "_") * (n // 29),
    "bearer_spaces": lambda n: "bearer " + " " * n + "x",
    "bearer_no_digit": lambda n: "bearer " + "a" * n,
    "ipv6_zone": lambda n: "1:1:%" + "a" * n + ":",
    "ipv6_colons": lambda n: "a:" * (n // 2),
    # the gates (redaction_gates.py) on what they scan most
    "gate_key_words_dense": lambda n: "token:" * (n // 6),
    "gate_key_word_windows": lambda n: ("key" + " " * 40 + "=") * (n // 44),
    "gate_hex_colons": lambda n: "f:" * (n // 2) + "::",
}
#: linear, but each match runs Python (ipaddress, Luhn, libphonenumber at ~0.4 ms a number):
#: measured at smaller sizes to keep the test short
SLOW_FAMILIES: dict[str, Callable[[int], str]] = {
    "ipv6_groups": lambda n: " 1:" * (n // 3),
    "ipv4_dots": lambda n: "1.1.1." * (n // 6),
    "card_spaced_digits": lambda n: "1 " * (n // 2),
    "card_dashed_digits": lambda n: "1-" * (n // 2),
    "phone_parens": lambda n: "(1" * (n // 2),
    "phone_plus": lambda n: "+1 " * (n // 3),
    "phone_numbers": lambda n: "415 555 0132 " * (n // 13),
    "digits_and_dots": lambda n: "1." * (n // 2),
}
GROWTH = 16
MAX_GROWTH = 64
FLOOR_S = 0.002
CAP_S = 5.0


@contextmanager
def cpu_cap(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in this (main) thread once the process has used ``seconds`` more CPU."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"redaction used more than {seconds} s of CPU")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def cpu_seconds(text: str, runs: int = 2) -> float:
    """Least CPU time of ``runs`` redactions of ``text`` (budget lifted: linearity is measured)."""
    best = float("inf")
    for _ in range(runs):
        with record_budget(max_chars=10**8, cpu_s=1e9), cpu_cap(CAP_S):
            t0 = time.process_time()
            r.redact(text)
            best = min(best, time.process_time() - t0)
    return best


def assert_linear(make: Callable[[int], str], mid: int) -> None:
    t_mid = cpu_seconds(make(mid))
    t_big = cpu_seconds(make(mid * GROWTH))
    assert t_big <= MAX_GROWTH * max(t_mid, FLOOR_S), (
        f"{mid} chars: {t_mid * 1e3:.1f} ms, {mid * GROWTH} chars: {t_big * 1e3:.1f} ms "
        f"(x{t_big / max(t_mid, 1e-9):.0f}; linear is x{GROWTH})"
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_adversarial_inputs_take_linear_time(family: str) -> None:
    """4,000 -> 64,000 characters of each family."""
    assert_linear(FAMILIES[family], 4_000)


@pytest.mark.parametrize("family", sorted(SLOW_FAMILIES))
def test_adversarial_inputs_with_many_matches_take_linear_time(family: str) -> None:
    """1,000 -> 16,000 characters of each family."""
    assert_linear(SLOW_FAMILIES[family], 1_000)


@pytest.mark.parametrize(
    ("family", "chars"),
    [
        ("key_value_dots", 4_006),  # the prompt: 11.9 CPU s on main (24 s loaded)
        ("email_local_bangs", 32_000),  # 16,000 chars: 1.6 CPU s on main (quadratic)
        ("pem_begin_lines", 128_000),  # 3.9 CPU s on main (quadratic)
        ("jwt_dash_runs", 128_000),  # 3.1 CPU s on main (quadratic)
    ],
)
def test_the_reported_inputs_take_milliseconds(family: str, chars: int) -> None:
    """The reproductions of issue 35, one call each: under 1 CPU s, far above what they take
    now (0.1-20 ms) and far below what they took before the fix."""
    assert cpu_seconds(FAMILIES[family](chars), runs=1) < 1.0


def test_text_far_past_the_limit_costs_only_the_limit() -> None:
    """3,000,000 characters with the default 1,000,000-character limit: the rest is cut off
    before any pattern sees it (one scan for the cut, then a linear redaction)."""
    text = ("mail jane@example.com, call (415) 555-0132. " * 70_000)[:3_000_000]
    with cpu_cap(CAP_S):
        t0 = time.process_time()
        out, _ = r.redact_count(text)
        spent = time.process_time() - t0
    assert spent < DEFAULT_CPU_S + 1.0
    assert "jane" not in out and "555-0132" not in out
    assert len(out) < 1_000_100


def test_the_default_budget_bounds_every_family_at_sixty_four_thousand_chars() -> None:
    """Through the public path with its default bounds (0.5 CPU s per record): each family at
    64,000 characters takes at most the budget and one step past it, and comes back either
    scanned or replaced whole by the over-budget marker."""
    marker = OVER_BUDGET.split("{")[0]
    for family, make in {**FAMILIES, **SLOW_FAMILIES}.items():
        text = make(64_000)
        with cpu_cap(CAP_S):
            t0 = time.process_time()
            out = r.redact(text)
            spent = time.process_time() - t0
        assert spent < DEFAULT_CPU_S + 1.0, (family, spent)
        assert out.text is not None and out.counts is not None
        if marker in out.text:
            assert out.text == OVER_BUDGET.format(n=len(text)), family
            assert out.counts.total == 0
