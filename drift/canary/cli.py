"""``driftline canary ...`` commands, loaded lazily by ``driftline.cli``
(``drift.canary.cli:canary``)."""

from __future__ import annotations

import json
from typing import Any

import click
import httpx
import numpy as np

from drift.canary.simulate import simulate
from drift.cli import drift  # the `driftline drift` group (LAZY_COMMANDS: drift.canary.cli:drift)

__all__ = ["canary", "drift"]


@click.group()
def canary() -> None:
    """Canary / A-B rollouts with anytime-valid promotion decisions."""


@canary.command("simulate")
@click.option(
    "--scenario", type=click.Choice(["aa", "regression"]), default="aa", show_default=True
)
@click.option("--runs", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--looks", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--samples-per-look",
    type=click.IntRange(min=2),
    default=400,
    show_default=True,
    help="requests (both arms) arriving between two looks",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
)
def simulate_command(
    scenario: str, runs: int, looks: int, seed: int, samples_per_look: int, alpha: float
) -> None:
    """Run the decision engine on simulated streams and print RESULT lines.

    aa: false_decision_rate = share of runs rolled back (never warranted when the arms are
    identical; promote is correct). regression (candidate TTFT +10 %, margin 5 %):
    false_decision_rate = share of runs promoted, detection_samples_ratio = requests by which
    80 % of runs rolled back / fixed-n z-test requests at the same alpha/K and power 0.8.
    Definitions: drift.canary.simulate module docstring.
    """
    result = simulate(
        "regression" if scenario == "regression" else "aa",
        runs=runs,
        looks=looks,
        rng=np.random.default_rng(seed),
        samples_per_look=samples_per_look,
        alpha=alpha,
    )
    click.echo(
        f"scenario={result.scenario} runs={result.runs} looks={result.looks} "
        f"promote={result.promote} rollback={result.rollback} "
        f"inconclusive={result.inconclusive}"
    )
    click.echo(f"RESULT false_decision_rate={result.false_decision_rate:.4f}")
    if result.detection_samples_ratio is not None:
        click.echo(f"RESULT detection_samples_ratio={result.detection_samples_ratio:.3f}")
        click.echo(f"RESULT fixed_n_samples={result.fixed_n_samples:.0f} requests")


# ---- rollouts on a running collector (HTTP) ------------------------------------------------

_collector_url = click.option(
    "--collector-url",
    envvar="DRIFTLINE_COLLECTOR_URL",
    default="http://127.0.0.1:4318",
    show_default=True,
    help="collector REST base URL",
)
_api_key = click.option(
    "--api-key",
    envvar="DRIFTLINE_API_KEY",
    default=None,
    help="collector API key (admin for evaluate/pause/resume/abort; not needed with --dev)",
)


def _request(
    method: str, url: str, path: str, api_key: str | None, **kwargs: Any
) -> dict[str, Any]:
    """Call the collector; a 4xx/5xx or connection error becomes a ClickException."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.request(method, url.rstrip("/") + path, headers=headers, timeout=30, **kwargs)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"collector at {url} unreachable: {exc}") from None
    if resp.status_code >= 400:
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:500]
        raise click.ClickException(f"HTTP {resp.status_code}: {message}")
    body: dict[str, Any] = resp.json()
    return body


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['name']}: {r['status']} step {r['step_index'] + 1}/{len(r['steps_pct'])} "
        f"{r['candidate_variant']}={r['candidate_weight_pct']:g}% "
        f"{r['baseline_variant']}={r['baseline_weight_pct']:g}% "
        f"v{r['version']} last={r['latest']['decision'] or '-'}"
    )


@canary.command("status")
@click.argument("name", required=False)
@_collector_url
@_api_key
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON")
def status_command(
    name: str | None, collector_url: str, api_key: str | None, as_json: bool
) -> None:
    """Show one rollout (state, weights, latest reasons) or list all."""
    if name is None:
        body = _request("GET", collector_url, "/api/v1/rollouts", api_key)
        if as_json:
            click.echo(json.dumps(body, indent=2))
            return
        for r in body["items"]:
            click.echo(_line(r))
        return
    r = _request("GET", collector_url, f"/api/v1/rollouts/{name}", api_key)
    if as_json:
        click.echo(json.dumps(r, indent=2))
        return
    click.echo(_line(r))
    for reason in r["latest"]["reasons"]:
        click.echo(f"  - {reason}")


@canary.command("evaluate")
@click.argument("name")
@_collector_url
@_api_key
@click.option("--dry-run", is_flag=True, help="decide without applying")
def evaluate_command(name: str, collector_url: str, api_key: str | None, dry_run: bool) -> None:
    """Evaluate a rollout now and apply the decision (unless --dry-run)."""
    body = _request(
        "POST",
        collector_url,
        f"/api/v1/rollouts/{name}/evaluate",
        api_key,
        params={"apply": "false" if dry_run else "true"},
    )
    click.echo(f"decision={body['decision']} applied={str(body['applied']).lower()}")
    click.echo(_line(body["rollout"]))
    for reason in body["reasons"]:
        click.echo(f"  - {reason}")


def _override(action: str) -> click.Command:
    @click.command(action, help=f"{action.capitalize()} a rollout (audited, needs a reason).")
    @click.argument("name")
    @click.option("--reason", required=True, help="why (stored in the audit log)")
    @_collector_url
    @_api_key
    def command(name: str, reason: str, collector_url: str, api_key: str | None) -> None:
        body = _request(
            "POST",
            collector_url,
            f"/api/v1/rollouts/{name}/override",
            api_key,
            json={"action": action, "reason": reason},
        )
        click.echo(_line(body["rollout"]))

    return command


for _action in ("pause", "resume", "abort"):
    canary.add_command(_override(_action))
