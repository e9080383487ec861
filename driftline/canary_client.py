"""``driftline canary create|list|show|override``: rollouts over the collector's REST API.

Attached to the ``canary`` group of :mod:`drift.canary.cli` by :mod:`driftline.cli` (drift
never imports driftline). Talks HTTP only (httpx) to ``--url`` (``DRIFTLINE_URL``) with
``--api-key`` (``DRIFTLINE_API_KEY``; a key with the admin role for create/override).
An API error prints its message and exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import httpx

DEFAULT_URL = "http://127.0.0.1:4318"

_url = click.option(
    "--url", envvar="DRIFTLINE_URL", default=DEFAULT_URL, show_default=True, help="Collector."
)
_key = click.option("--api-key", envvar="DRIFTLINE_API_KEY", default=None, help="Bearer key.")
_json = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")


def _request(method: str, url: str, path: str, api_key: str | None, **kw: Any) -> Any:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.request(method, url.rstrip("/") + path, headers=headers, timeout=30, **kw)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from None
    if r.status_code >= 400:
        try:
            msg = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            msg = r.text[:500]
        raise click.ClickException(f"HTTP {r.status_code}: {msg}")
    return r.json()


def _summary(r: dict[str, Any]) -> str:
    return (
        f"{r['name']}: {r['status']}  {r['baseline_variant']} {r['baseline_weight_pct']:g}% / "
        f"{r['candidate_variant']} {r['candidate_weight_pct']:g}%  step {r['step_index']}"
        f"  last: {(r.get('latest') or {}).get('decision') or '-'}"
    )


@click.command("create")
@click.argument("name")
@click.option("--baseline", required=True, help="Baseline variant (served today).")
@click.option("--candidate", required=True, help="Candidate variant.")
@click.option("--steps", default="5,25,50,100", show_default=True, help="Candidate % per step.")
@click.option("--min-samples-per-step", type=click.IntRange(min=1), default=None)
@click.option("--min-step-duration-s", type=click.FloatRange(min=0), default=None)
@click.option("--max-duration-s", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option(
    "--policy-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON body of POST /api/v1/rollouts (guardrails, quality, ...); options override it.",
)
@_url
@_key
@_json
def create(
    name: str,
    baseline: str,
    candidate: str,
    steps: str,
    min_samples_per_step: int | None,
    min_step_duration_s: float | None,
    max_duration_s: float | None,
    policy_file: Path | None,
    url: str,
    api_key: str | None,
    as_json: bool,
) -> None:
    """Start rollout NAME of --candidate against --baseline."""
    body: dict[str, Any] = json.loads(policy_file.read_text()) if policy_file else {}
    try:
        body["steps_pct"] = [float(s) for s in steps.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(
            f"comma-separated percents, got {steps!r}", param_hint="--steps"
        ) from None
    body.update(name=name, baseline_variant=baseline, candidate_variant=candidate)
    for key, value in (
        ("min_samples_per_step", min_samples_per_step),
        ("min_step_duration_s", min_step_duration_s),
        ("max_duration_s", max_duration_s),
    ):
        if value is not None:
            body[key] = value
    out = _request("POST", url, "/api/v1/rollouts", api_key, json=body)
    click.echo(json.dumps(out, indent=2) if as_json else f"created {_summary(out)}")


@click.command("list")
@_url
@_key
@_json
def list_(url: str, api_key: str | None, as_json: bool) -> None:
    """List rollouts."""
    out = _request("GET", url, "/api/v1/rollouts", api_key)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    items = out.get("items", [])
    if not items:
        click.echo("no rollouts")
    for r in items:
        click.echo(_summary(r))


@click.command("show")
@click.argument("name")
@click.option("--decisions", type=click.IntRange(min=0), default=5, show_default=True)
@_url
@_key
@_json
def show(name: str, decisions: int, url: str, api_key: str | None, as_json: bool) -> None:
    """A rollout's state, latest reasons and recent decisions."""
    out = _request("GET", url, f"/api/v1/rollouts/{name}", api_key)
    log = (
        _request(
            "GET", url, f"/api/v1/rollouts/{name}/decisions", api_key, params={"limit": decisions}
        )
        if decisions
        else {"items": []}
    )
    if as_json:
        click.echo(json.dumps({"rollout": out, "decisions": log["items"]}, indent=2))
        return
    click.echo(_summary(out))
    for reason in (out.get("latest") or {}).get("reasons") or []:
        click.echo(f"  reason: {reason}")
    for d in log["items"]:
        click.echo(f"  {d.get('decided_at')}  {d.get('action')}  by {d.get('actor')}")


@click.command("override")
@click.argument("name")
@click.argument("action", type=click.Choice(["promote", "rollback", "pause", "resume", "abort"]))
@click.option("--reason", required=True, help="Why (kept in the audit log).")
@_url
@_key
@_json
def override(
    name: str, action: str, reason: str, url: str, api_key: str | None, as_json: bool
) -> None:
    """Manually promote, roll back, pause, resume or abort rollout NAME."""
    out = _request(
        "POST",
        url,
        f"/api/v1/rollouts/{name}/override",
        api_key,
        json={"action": action, "reason": reason},
    )
    click.echo(
        json.dumps(out, indent=2) if as_json else f"{action}: {_summary(out.get('rollout', out))}"
    )


COMMANDS = (create, list_, show, override)


def attach(group: click.Group) -> click.Group:
    """Add the REST commands to ``group`` (the ``canary`` group); idempotent."""
    for cmd in COMMANDS:
        if cmd.name not in group.commands:
            group.add_command(cmd)
    return group
