"""``driftline canary create|list|show|override`` against a live collector (real HTTP)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from driftline.cli import cli
from tests.conftest import LiveCollector


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_canary_cli_round_trip(live_collector: LiveCollector) -> None:
    url = ("--url", live_collector.http_url)
    code, out = _run("canary", "list", *url)
    assert (code, out.strip()) == (0, "no rollouts")
    code, out = _run(
        "canary",
        "create",
        "support",
        "--baseline",
        "base",
        "--candidate",
        "cand",
        "--steps",
        "10,50,100",
        "--min-samples-per-step",
        "50",
        *url,
    )
    assert code == 0, out
    assert out.startswith("created support: running  base 90% / cand 10%")
    code, out = _run("canary", "list", "--json", *url)
    assert [r["name"] for r in json.loads(out)["items"]] == ["support"]
    code, out = _run("canary", "override", "support", "pause", "--reason", "on-call check", *url)
    assert code == 0 and out.startswith("pause: support: paused"), out
    code, out = _run("canary", "show", "support", *url)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("support: paused")
    assert [line.split()[1] for line in lines[1:]] == ["pause", "create"]  # newest first
    code, out = _run("canary", "show", "nope", *url)
    assert code == 1 and "HTTP 404" in out
    code, out = _run("canary", "create", "bad name", "--baseline", "a", "--candidate", "b", *url)
    assert code == 1 and "HTTP 400" in out and "name must match" in out
    code, out = _run("canary", "list", "--url", "http://127.0.0.1:9")
    assert code == 1 and "cannot reach" in out
