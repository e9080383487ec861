"""Engine metrics: parsing every engine's exposition, windowed rates, and the HTTP scraper."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.engines.histogram import LatencyHistogram, histogram_delta, histogram_quantile
from collector.engines.rates import engine_rates
from collector.engines.scrape import (
    EngineKind,
    EngineSample,
    ScrapeError,
    parse_exposition,
    scrape,
)
from collector.errors import CollectorError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_metrics"
T0 = 1_760_000_000.0


def parse_fixture(name: str) -> list[EngineSample]:
    return parse_exposition((FIXTURES / name).read_text(), scraped_at_unix_s=T0)


def only(samples: list[EngineSample]) -> EngineSample:
    assert len(samples) == 1, samples
    return samples[0]


# --- parsing: one fixture per engine and version ---------------------------------------------


def test_vllm_current_names() -> None:
    s = only(parse_fixture("vllm_current.txt"))
    assert s.engine_kind is EngineKind.VLLM
    assert s.key == ("vllm", "Qwen/Qwen2.5-1.5B-Instruct", "0")
    assert s.scraped_at_unix_s == T0
    assert s.kv_cache_usage == pytest.approx(0.4375)
    assert (s.requests_running, s.requests_waiting) == (3, 2)
    assert (s.prefix_cache_queries_total, s.prefix_cache_hits_total) == (51200, 20480)
    assert s.spec_decode_draft_tokens_total == 3000
    assert s.spec_decode_accepted_tokens_total == 1800
    assert s.spec_decode_drafts_total == 1000
    assert s.preemptions_total == 4
    assert (s.prompt_tokens_total, s.generation_tokens_total) == (123456, 65432)
    # vLLM computes no hit-rate gauge any more: unknown, not 0
    assert s.reported_prefix_cache_hit_rate is None
    assert s.reported_spec_accept_length is None


def test_vllm_lora_info_takes_the_newest_series() -> None:
    s = only(parse_fixture("vllm_current.txt"))
    # three series; the one with the largest timestamp value is the present state
    assert s.lora_running_adapters == ("candidate",)
    assert s.lora_waiting_adapters == ("candidate", "canary-b")
    assert s.lora_max == 2


def test_vllm_histograms_are_cumulative_seconds() -> None:
    s = only(parse_fixture("vllm_current.txt"))
    assert s.ttft_s is not None and s.itl_s is not None
    assert s.e2e_s is not None and s.queue_s is not None
    assert s.ttft_s.count == 42 and s.ttft_s.sum_s == pytest.approx(3.125)
    assert s.ttft_s.mean_s == pytest.approx(3.125 / 42)
    bounds = [b for b, _ in s.ttft_s.buckets]
    assert bounds[0] == 0.001 and bounds[-1] == math.inf and bounds == sorted(bounds)
    counts = [c for _, c in s.ttft_s.buckets]
    assert counts == sorted(counts) and counts[-1] == s.ttft_s.count
    assert s.itl_s.count == 4100
    assert s.e2e_s.count == s.queue_s.count == 42


def test_vllm_deprecated_names_are_read() -> None:
    s = only(parse_fixture("vllm_0_8_deprecated_names.txt"))
    assert s.engine_index is None
    assert s.kv_cache_usage == pytest.approx(0.91)  # vllm:gpu_cache_usage_perc
    assert (s.prefix_cache_queries_total, s.prefix_cache_hits_total) == (8000, 6000)
    assert s.itl_s is not None and s.itl_s.count == 40  # vllm:time_per_output_token_seconds
    assert s.preemptions_total == 0  # exported as 0: a real zero, kept
    assert s.spec_decode_draft_tokens_total is None  # not exported: unknown
    assert s.lora_running_adapters is None


def test_vllm_v0_has_hit_rate_gauge_but_no_prefix_counters() -> None:
    s = only(parse_fixture("vllm_0_6_v0.txt"))
    assert s.kv_cache_usage == pytest.approx(0.25)
    assert s.reported_prefix_cache_hit_rate == pytest.approx(0.5)
    assert s.prefix_cache_queries_total is None and s.prefix_cache_hits_total is None
    assert (s.requests_running, s.requests_waiting, s.preemptions_total) == (1, 5, 12)
    assert s.ttft_s is None and s.itl_s is None


def test_current_vllm_name_wins_over_deprecated_one() -> None:
    text = (
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.9\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.3\n'
        'vllm:gpu_prefix_cache_queries_total{model_name="m"} 10\n'
        'vllm:prefix_cache_queries_total{model_name="m"} 100\n'
        'vllm:prefix_cache_hits_total{model_name="m"} 40\n'
    )
    s = only(parse_exposition(text, scraped_at_unix_s=T0))
    assert s.kv_cache_usage == pytest.approx(0.3)
    assert s.prefix_cache_queries_total == 100


def test_tgi() -> None:
    s = only(parse_fixture("tgi.txt"))
    assert s.engine_kind is EngineKind.TGI
    assert s.model_name is None and s.engine_index is None
    assert (s.requests_running, s.requests_waiting) == (8, 4)
    # token totals are the _sum of the per-request token histograms
    assert (s.prompt_tokens_total, s.generation_tokens_total) == (61250, 9876)
    assert s.kv_cache_usage is None and s.ttft_s is None
    assert s.prefix_cache_hits_total is None and s.preemptions_total is None
    assert s.e2e_s is not None and s.e2e_s.count == 117
    assert s.itl_s is not None and s.itl_s.sum_s == pytest.approx(2.6)
    assert s.queue_s is not None and s.queue_s.count == 117


def test_sglang() -> None:
    s = only(parse_fixture("sglang.txt"))
    assert s.engine_kind is EngineKind.SGLANG
    assert s.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert s.kv_cache_usage == pytest.approx(0.28)
    assert (s.requests_running, s.requests_waiting) == (12, 3)
    # cached_tokens_total against prompt_tokens_total is the hits / queries pair
    assert s.prefix_cache_hits_total == 4064451
    assert s.prefix_cache_queries_total == s.prompt_tokens_total == 8128902
    assert s.generation_tokens_total == 7557572
    assert s.preemptions_total == 17  # retractions
    assert s.reported_prefix_cache_hit_rate == pytest.approx(0.4975)
    assert s.reported_spec_accept_rate == pytest.approx(0.6125)
    assert s.reported_spec_accept_length == pytest.approx(2.85)  # a length, not a ratio
    assert s.spec_decode_draft_tokens_total is None
    assert s.ttft_s is not None and s.ttft_s.count == 10000
    assert s.queue_s is not None and s.queue_s.sum_s == pytest.approx(310.0)


def test_sglang_dp_ranks_sum_counts_and_average_ratios() -> None:
    text = (
        'sglang:num_running_reqs{model_name="m",dp_rank="0"} 4\n'
        'sglang:num_running_reqs{model_name="m",dp_rank="1"} 6\n'
        'sglang:token_usage{model_name="m",dp_rank="0"} 0.2\n'
        'sglang:token_usage{model_name="m",dp_rank="1"} 0.6\n'
    )
    s = only(parse_exposition(text, scraped_at_unix_s=T0))
    assert s.requests_running == 10
    assert s.kv_cache_usage == pytest.approx(0.4)


def test_llamacpp_current_adds_cached_prompt_tokens() -> None:
    s = only(parse_fixture("llamacpp_current.txt"))
    assert s.engine_kind is EngineKind.LLAMACPP
    processed, cached = 9664, 38656  # prompt_tokens_total excludes cached tokens
    assert s.prefix_cache_hits_total == cached
    assert s.prefix_cache_queries_total == processed + cached
    assert s.prompt_tokens_total == processed + cached
    assert s.generation_tokens_total == 23210
    assert (s.requests_running, s.requests_waiting) == (1, 0)
    assert s.spec_decode_draft_tokens_total == 4000
    assert s.spec_decode_accepted_tokens_total == 2600
    assert s.spec_decode_drafts_total == 1000
    assert s.kv_cache_usage is None  # current builds dropped the gauge


def test_llamacpp_2024_without_type_lines() -> None:
    s = only(parse_fixture("llamacpp_2024.txt"))
    assert s.kv_cache_usage == pytest.approx(0.63)
    assert (s.requests_running, s.requests_waiting) == (2, 1)
    assert s.prompt_tokens_total == 33065
    assert s.prefix_cache_hits_total is None and s.prefix_cache_queries_total is None
    assert s.spec_decode_draft_tokens_total is None


def test_llamabox_speculative_names() -> None:
    text = "llamacpp:tokens_drafted_total 50\nllamacpp:tokens_drafted_accepted_total 20\n"
    s = only(parse_exposition(text, scraped_at_unix_s=T0))
    assert (s.spec_decode_draft_tokens_total, s.spec_decode_accepted_tokens_total) == (50, 20)


def test_one_sample_per_engine_index_and_lora_per_engine() -> None:
    text = (
        'vllm:num_requests_running{model_name="m",engine="0"} 1\n'
        'vllm:num_requests_running{model_name="m",engine="1"} 5\n'
        'vllm:lora_requests_info{engine="1",max_lora="1",running_lora_adapters="a",'
        'waiting_lora_adapters=""} 1760000000\n'
        'vllm:cache_config_info{engine="0",block_size="16"} 1\n'
    )
    samples = parse_exposition(text, scraped_at_unix_s=T0)
    assert [s.engine_index for s in samples] == ["0", "1"]
    assert [s.requests_running for s in samples] == [1, 5]
    assert samples[0].lora_running_adapters is None
    assert samples[1].lora_running_adapters == ("a",)
    assert samples[1].lora_waiting_adapters == ()  # known empty, not unknown


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('vllm:kv_cache_usage_perc{model_name="m"} 1.5', "kv_cache_usage"),
        ('vllm:kv_cache_usage_perc{model_name="m"} NaN', "kv_cache_usage"),
        ('vllm:num_requests_waiting{model_name="m"} -1', "requests_waiting"),
        ('vllm:prompt_tokens_total{model_name="m"} +Inf', "prompt_tokens_total"),
    ],
)
def test_impossible_values_are_unknown(line: str, field: str) -> None:
    text = line + '\nvllm:num_requests_running{model_name="m"} 2\n'
    s = only(parse_exposition(text, scraped_at_unix_s=T0))
    assert getattr(s, field) is None
    assert s.requests_running == 2


def test_non_engine_exposition_gives_no_samples() -> None:
    text = "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 1.5\n"
    assert parse_exposition(text, scraped_at_unix_s=T0) == []


@pytest.mark.parametrize("text", ["<html><body>502</body></html>", '{"detail": "x"}', "a b\n"])
def test_garbage_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="text is not a Prometheus exposition"):
        parse_exposition(text, scraped_at_unix_s=T0)


def test_scraped_at_must_be_finite() -> None:
    with pytest.raises(ValueError, match="scraped_at_unix_s"):
        parse_exposition("", scraped_at_unix_s=math.nan)


def test_samples_are_frozen() -> None:
    s = only(parse_fixture("vllm_current.txt"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.requests_running = 0  # type: ignore[misc]


# --- windowed rates ------------------------------------------------------------------------------


def later(sample: EngineSample, seconds: float, **changes: Any) -> EngineSample:
    return dataclasses.replace(
        sample, scraped_at_unix_s=sample.scraped_at_unix_s + seconds, **changes
    )


def test_rates_are_ratios_of_counter_deltas() -> None:
    before = only(parse_fixture("vllm_current.txt"))
    after = later(
        before,
        10.0,
        prefix_cache_queries_total=51200 + 4000,
        prefix_cache_hits_total=20480 + 1000,
        spec_decode_draft_tokens_total=3000 + 300,
        spec_decode_accepted_tokens_total=1800 + 240,
        spec_decode_drafts_total=1000 + 100,
        prompt_tokens_total=123456 + 5000,
        generation_tokens_total=65432 + 2500,
        preemptions_total=4 + 1,
    )
    r = engine_rates(before, after)
    assert r.interval_s == pytest.approx(10.0)
    assert r.counter_reset is False
    assert r.prefix_cache_hit_rate == pytest.approx(1000 / 4000)
    assert r.spec_decode_acceptance_rate == pytest.approx(240 / 300)
    assert r.spec_decode_mean_acceptance_length == pytest.approx(1 + 240 / 100)
    assert r.prompt_tokens_per_s == pytest.approx(500.0)
    assert r.generation_tokens_per_s == pytest.approx(250.0)
    assert r.preemptions_per_s == pytest.approx(0.1)


def test_lifetime_ratio_is_not_the_window_ratio() -> None:
    before = only(parse_fixture("vllm_current.txt"))  # lifetime hit rate 0.4
    after = later(
        before, 5.0, prefix_cache_queries_total=51200 + 100, prefix_cache_hits_total=20480 + 90
    )
    assert engine_rates(before, after).prefix_cache_hit_rate == pytest.approx(0.9)


def test_zero_denominator_delta_gives_none() -> None:
    before = only(parse_fixture("vllm_current.txt"))
    r = engine_rates(before, later(before, 15.0))  # nothing moved
    assert r.prefix_cache_hit_rate is None
    assert r.spec_decode_acceptance_rate is None
    assert r.spec_decode_mean_acceptance_length is None
    assert r.ttft_mean_s is None and r.ttft_p95_s is None  # no request in the window
    assert r.prompt_tokens_per_s == 0.0  # a known zero rate
    assert r.counter_reset is False


def test_counter_reset_gives_none_and_is_flagged() -> None:
    before = only(parse_fixture("vllm_current.txt"))
    restarted = later(
        before,
        15.0,
        prefix_cache_queries_total=300,
        prefix_cache_hits_total=100,
        prompt_tokens_total=300,
    )
    r = engine_rates(before, restarted)
    assert r.counter_reset is True
    assert r.prefix_cache_hit_rate is None
    assert r.prompt_tokens_per_s is None
    # counters that kept climbing still give their rate
    assert r.generation_tokens_per_s == 0.0


def test_reset_of_the_numerator_alone_gives_none() -> None:
    before = only(parse_fixture("vllm_current.txt"))
    after = later(
        before, 1.0, spec_decode_accepted_tokens_total=10, spec_decode_draft_tokens_total=3100
    )
    r = engine_rates(before, after)
    assert r.spec_decode_acceptance_rate is None and r.counter_reset is True


def test_unknown_counters_give_unknown_rates() -> None:
    before = only(parse_fixture("tgi.txt"))
    r = engine_rates(before, later(before, 2.0, generation_tokens_total=9876 + 100))
    assert r.prefix_cache_hit_rate is None
    assert r.spec_decode_acceptance_rate is None
    assert r.preemptions_per_s is None
    assert r.generation_tokens_per_s == pytest.approx(50.0)


def test_latency_window_mean_and_quantiles() -> None:
    before = only(parse_fixture("vllm_current.txt"))
    assert before.ttft_s is not None
    assert before.ttft_s.count is not None and before.ttft_s.sum_s is not None
    # ten more requests, all with TTFT in (0.1, 0.25]: bump every bucket from le=0.25 upwards
    bumped = tuple((b, c + 10 if b >= 0.25 else c) for b, c in before.ttft_s.buckets)
    ttft = LatencyHistogram(
        buckets=bumped, count=before.ttft_s.count + 10, sum_s=before.ttft_s.sum_s + 2.0
    )
    r = engine_rates(before, later(before, 30.0, ttft_s=ttft))
    assert r.ttft_mean_s == pytest.approx(0.2)
    # rank 5 of 10 inside the (0.1, 0.25] bucket: 0.1 + 0.15 * 5/10
    assert r.ttft_p50_s == pytest.approx(0.175)
    assert r.ttft_p95_s == pytest.approx(0.1 + 0.15 * 9.5 / 10)
    assert r.itl_mean_s is None  # no new tokens in the window


def test_rates_reject_other_engine_or_time_going_backwards() -> None:
    vllm = only(parse_fixture("vllm_current.txt"))
    with pytest.raises(ValueError, match="current"):
        engine_rates(vllm, later(vllm, 1.0, engine_index="1"))
    with pytest.raises(ValueError, match="current"):
        engine_rates(vllm, later(vllm, 0.0))


# --- histogram helpers -------------------------------------------------------------------------


def test_histogram_quantile_follows_prometheus() -> None:
    h = LatencyHistogram(
        buckets=((1.0, 0.0), (2.0, 10.0), (math.inf, 10.0)), count=10.0, sum_s=15.0
    )
    assert histogram_quantile(0.5, h) == pytest.approx(1.5)
    assert histogram_quantile(1.0, h) == pytest.approx(2.0)
    first = LatencyHistogram(buckets=((0.5, 4.0), (math.inf, 4.0)), count=4.0, sum_s=1.0)
    assert histogram_quantile(0.25, first) == pytest.approx(0.125)  # lower bound 0
    overflow = LatencyHistogram(buckets=((1.0, 1.0), (math.inf, 10.0)), count=10.0, sum_s=50.0)
    assert histogram_quantile(0.9, overflow) == 1.0  # rank in +Inf: largest finite bound
    empty = LatencyHistogram(buckets=((1.0, 0.0), (math.inf, 0.0)), count=0.0, sum_s=0.0)
    assert histogram_quantile(0.5, empty) is None
    summary = LatencyHistogram(buckets=(), count=3.0, sum_s=1.5)
    assert histogram_quantile(0.5, summary) is None and summary.mean_s == pytest.approx(0.5)
    with pytest.raises(ValueError, match="q must be"):
        histogram_quantile(1.5, h)


def test_histogram_delta_detects_reset_and_bucket_change() -> None:
    a = LatencyHistogram(buckets=((1.0, 5.0), (math.inf, 6.0)), count=6.0, sum_s=3.0)
    b = LatencyHistogram(buckets=((1.0, 7.0), (math.inf, 9.0)), count=9.0, sum_s=4.5)
    d = histogram_delta(a, b)
    assert d == LatencyHistogram(buckets=((1.0, 2.0), (math.inf, 3.0)), count=3.0, sum_s=1.5)
    assert histogram_delta(b, a) is None
    other = LatencyHistogram(buckets=((2.0, 7.0), (math.inf, 9.0)), count=9.0, sum_s=4.5)
    assert histogram_delta(a, other) is None


# --- scraper against a real local HTTP server -------------------------------------------------


VLLM_BODY = (FIXTURES / "vllm_current.txt").read_bytes()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(
        self, status: int, body: bytes, content_type: str = "text/plain; version=0.0.4"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            return  # the scraper gave up first (timeout, body limit): expected

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, VLLM_BODY)
        elif self.path == "/error":
            self._send(500, b"Internal Server Error")
        elif self.path == "/slow":
            time.sleep(1.5)
            self._send(200, VLLM_BODY)
        elif self.path == "/drip":
            # headers at once, then one byte every 0.1 s: each read is fast, the whole is slow
            self.send_response(200)
            self.send_header("Content-Length", "40")
            self.end_headers()
            try:
                for _ in range(40):
                    self.wfile.write(b"#")
                    self.wfile.flush()
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                return
        elif self.path == "/garbage":
            self._send(200, b"<html><body>upstream says no</body></html>", "text/html")
        elif self.path == "/binary":
            self._send(200, b"\xff\xfe\x00garbage")
        elif self.path == "/python-only":
            self._send(200, b"# TYPE process_open_fds gauge\nprocess_open_fds 12\n")
        else:
            self._send(404, b"not found")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def run_scrape(url: str, timeout_s: float = 2.0, **kwargs: int) -> list[EngineSample]:
    async def go() -> list[EngineSample]:
        async with httpx.AsyncClient() as client:
            return await scrape(client, url, timeout_s, **kwargs)

    return asyncio.run(go())


def test_scrape_ok(server_url: str) -> None:
    started = time.time()
    s = only(run_scrape(f"{server_url}/metrics"))
    assert s.engine_kind is EngineKind.VLLM and s.requests_running == 3
    assert started <= s.scraped_at_unix_s <= time.time()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/error", "HTTP 500"),
        ("/nope", "HTTP 404"),
        ("/garbage", "not a Prometheus text exposition"),
        ("/binary", "not a Prometheus text exposition"),
        ("/python-only", "no vLLM, TGI, SGLang or llama.cpp metrics"),
    ],
)
def test_scrape_errors(server_url: str, path: str, reason: str) -> None:
    url = f"{server_url}{path}"
    with pytest.raises(ScrapeError) as info:
        run_scrape(url)
    assert isinstance(info.value, CollectorError)
    assert info.value.url == url and reason in info.value.reason
    assert url in str(info.value)


@pytest.mark.parametrize("path", ["/slow", "/drip"])
def test_scrape_timeout_is_an_overall_deadline(server_url: str, path: str) -> None:
    started = time.monotonic()
    with pytest.raises(ScrapeError, match=r"timed out after 0\.3 s"):
        run_scrape(f"{server_url}{path}", timeout_s=0.3)
    assert time.monotonic() - started < 1.4  # well before the server would have finished


def test_scrape_body_limit(server_url: str) -> None:
    with pytest.raises(ScrapeError, match="body larger than 1024 bytes"):
        run_scrape(f"{server_url}/metrics", max_bytes=1024)


def test_scrape_connection_refused() -> None:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = probe.server_address[1]
    probe.server_close()  # nothing listens on this port any more
    with pytest.raises(ScrapeError, match="ConnectError"):
        run_scrape(f"http://127.0.0.1:{port}/metrics")


@pytest.mark.parametrize(
    ("timeout_s", "max_bytes", "name"), [(0.0, 10, "timeout_s"), (1.0, 0, "max_bytes")]
)
def test_scrape_validates_arguments(timeout_s: float, max_bytes: int, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        run_scrape("http://127.0.0.1:9/metrics", timeout_s=timeout_s, max_bytes=max_bytes)


def test_real_vllm_cpu_exposition_captured_from_the_demo_engine() -> None:
    """`GET /metrics` of the real vLLM 0.32 CPU engine (SmolLM2 + two LoRA adapters) captured
    under demo traffic: every KPI the dashboard shows is read, nothing invented."""
    text = (FIXTURES / "vllm_cpu_0_32_captured.txt").read_text()
    (s,) = parse_exposition(text, scraped_at_unix_s=1.0)
    assert s.engine_kind == "vllm" and s.model_name == "smollm2-135m-instruct"
    assert s.kv_cache_usage is not None and 0 <= s.kv_cache_usage <= 1
    assert s.requests_running is not None and s.requests_waiting is not None
    assert s.prefix_cache_queries_total and s.prefix_cache_hits_total is not None
    assert s.prefix_cache_hits_total <= s.prefix_cache_queries_total
    assert s.prompt_tokens_total and s.generation_tokens_total
    assert s.lora_max == 2 and s.lora_running_adapters is not None
    assert s.ttft_s is not None and s.ttft_s.count and s.ttft_s.count > 0
