"""``cbench verify``: recompute a model's release gates on fresh pairs (see :mod:`cbench.verify.gates`)."""

from __future__ import annotations

import json

import click

from cbench.cli.options import SEED_TYPE
from cbench.runtime.threads import use_cpu_threads


@click.command("verify")
@click.argument("case")
@click.option("--n-pairs", type=click.IntRange(min=10, max=100_000), default=1000, show_default=True,
              help="pairs per pair set (validation split and fresh samples)")
@click.option("--seed", type=SEED_TYPE, default=20261122, show_default=True,
              help="seed of the freshly sampled pairs")
@click.option("--sampled", "--no-dataset", "no_dataset", is_flag=True,
              help="fresh sampled pairs only (skip the counterfactuals validation split)")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def verify(case, n_pairs, seed, no_dataset, as_json):
    """Recompute every node and edge gate of a pulled model (CASE: case-3, case-3@v2.0.0, or an
    artifact directory) and print each with PASS/FAIL. Exit 0 when every gate holds, 1 otherwise."""
    from cbench.cli.discovery_cmds import resolve_case
    from cbench.verify.artifact import verify_artifact

    use_cpu_threads()
    art, _ref = resolve_case(case)
    report = verify_artifact(art, n_pairs=n_pairs, seed=seed, use_dataset=not no_dataset)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    else:
        click.echo(report.format())
    raise SystemExit(0 if report.passed else 1)
