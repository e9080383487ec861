"""``driftline canary ...`` commands, loaded lazily by ``driftline.cli``
(``drift.canary.cli:canary``)."""

from __future__ import annotations

import json
from typing import Any, cast

import click
import httpx
import numpy as np

from drift.canary.simulate import SCENARIOS, Scenario, simulate
from drift.canary.simulate_metrics import METRICS, Metric
from drift.cli import drift  # the `driftline drift` group (LAZY_COMMANDS: drift.canary.cli:drift)

__all__ = ["canary", "drift"]


@click.group()
def canary() -> None:
    """Canary / A-B rollouts with anytime-valid promotion decisions."""


@canary.command("simulate")
@click.option("--scenario", type=click.Choice(SCENARIOS), default="aa", show_default=True)
@click.option("--metric", type=click.Choice(METRICS), default="mean", show_default=True)
@click.option(
    "--candidate-share",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="candidate traffic share of the first step (the second: min(5 S, (1 + S)/2))",
)
@click.option("--runs", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--looks", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--samples-per-look",
    type=click.IntRange(min=2),
    default=None,
    help="requests (both arms) between two looks [default: 3 x fixed-n / looks]",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
)
def simulate_command(
    scenario: str,
    metric: str,
    candidate_share: float,
    runs: int,
    looks: int,
    seed: int,
    samples_per_look: int | None,
    alpha: float,
) -> None:
    """Run the production evidence/decision path on simulated rollouts; print RESULT lines.

    false_promote_rate / false_rollback_rate: share of runs with a promote / rollback where it is
    wrong (aa*: any rollback; ni-boundary: both; regression, judge-biased-sampling: any promote).
    detection_samples_ratio: requests by which 80 % of runs rolled back / fixed-n requests (nan
    where there is nothing to detect). Definitions: drift.canary.simulate module docstring.
    """
    if scenario == "judge-biased-sampling" and metric != "judge-score":
        raise click.BadParameter("needs --metric judge-score", param_hint="--scenario")
    result = simulate(
        cast(Scenario, scenario),
        cast(Metric, metric),
        runs=runs,
        looks=looks,
        rng=np.random.default_rng(seed),
        share=candidate_share,
        samples_per_look=samples_per_look,
        alpha=alpha,
    )
    click.echo(
        f"scenario={result.scenario} metric={result.metric} share={result.share:g} "
        f"runs={result.runs} looks={result.looks} samples_per_look={result.samples_per_look} "
        f"promote={result.promote} rollback={result.rollback} undecided={result.undecided}"
    )
    ratio = result.detection_samples_ratio
    click.echo(f"RESULT false_decision_rate={result.false_decision_rate:.4f}")
    click.echo(f"RESULT false_promote_rate={result.false_promote_rate:.4f}")
    click.echo(f"RESULT false_rollback_rate={result.false_rollback_rate:.4f}")
    click.echo(f"RESULT detection_samples_ratio={'nan' if ratio is None else f'{ratio:.3f}'}")
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
