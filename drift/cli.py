"""``driftline canary ...`` commands, loaded lazily by ``collector.cli`` (``drift.cli:canary``)."""

from __future__ import annotations

import click
import numpy as np

from drift.simulate import simulate


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
    Definitions: drift.simulate module docstring.
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
