"""``cbench localize``: where does a model hold one causal variable (IIA per location)."""

from __future__ import annotations

import click

from cbench.cli.options import SEED_TYPE, floats
from cbench.cli.output import Output, json_option, out_option
from cbench.runtime.threads import use_cpu_threads

#: cbench.localization.featurizers.FEATURIZERS, written out so that the CLI starts without torch (a test checks)
FEATURIZERS = ("identity", "dbm", "dbm-pca", "dbm-sae", "das", "pca", "random")


@click.command("localize")
@click.argument("case")
@click.option("--variable", "var_name", required=True, help="a high-level op of the case's program, e.g. is_x_2")
@click.option("--featurizer", type=click.Choice(list(FEATURIZERS)), default="das", show_default=True,
              help="identity (the full vector), dbm / dbm-pca / dbm-sae (a learned binary mask over standard "
                   "dimensions, principal components or SAE features), das, or the pca / random baselines")
@click.option("--k", type=click.IntRange(1, 100_000), default=None,
              help="subspace size (default: the variable's size in the Tracr program)")
@click.option("--locations", default=None,
              help="comma-separated locations (a1.h0, m0, resid.1, a0.h0+m0, m0[5,6]); default: every node and "
                   "residual layer, and the aligned location")
@click.option("--steps", type=click.IntRange(1, 100_000), default=64, show_default=True, help="DAS optimiser steps")
@click.option("--lr", type=floats(0, 10, low_open=True), default=0.01, show_default=True, help="DAS learning rate")
@click.option("--n-train", type=click.IntRange(1, 1_000_000), default=2048, show_default=True, help="train pairs")
@click.option("--n-test", type=click.IntRange(1, 1_000_000), default=1000, show_default=True, help="test pairs")
@click.option("--dataset", "dataset_dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="a local cbench/counterfactuals snapshot directory (default: the hub)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True,
              help="seeds every initialisation of the featurizer (DAS's rotation, masks, SAEs, PCA padding)")
@click.option("--iia-unit", type=click.Choice(["example", "position"]), default="example", show_default=True,
              help="example: MIB's IIA (share of examples right at every labelled position); position: share of "
                   "labelled positions")
@click.option("--reproducible", is_flag=True,
              help="leave wall-clock fields out of the results (fit and run times; created is the Unix epoch): "
                   "the same command with the same seed writes the same bytes")
@out_option("write a results document (kind localization) here")
@json_option
def localize(case, var_name, featurizer, k, locations, steps, lr, n_train, n_test, dataset_dir, seed, iia_unit,
             reproducible, out, as_json):
    """IIA of a featurizer for one variable at each candidate location of CASE (a model artifact
    directory or a case name); the ground truth is the aligned location (correspondence.json, or
    the Tracr op's residual dimensions)."""
    from cbench.api.scoring import model_input
    from cbench.cli.scoring_cmds import _artifact, _finish

    o = Output(as_json, out)
    art = _artifact(case)
    if dataset_dir is not None and art.model_kind != "variables":  # read and checked before torch loads
        from cbench.localization.rows import check_local_dataset

        check_local_dataset(art.case, art.meta, dataset_dir, n_train, n_test)
    from cbench.localization.featurizers import FeaturizerSpec
    from cbench.localization.localize import localize as run
    from cbench.localization.localize import results_doc

    use_cpu_threads()
    spec = FeaturizerSpec(featurizer, k=k, steps=steps, lr=lr, seed=seed)
    locs = [x.strip() for x in locations.split(",") if x.strip()] if locations else None
    if locations is not None and not locs:
        raise click.UsageError("--locations is empty")
    o.echo(f"case {art.case} ({art.model_kind}), variable {var_name}, featurizer {featurizer}")
    res = run(art, var_name, spec, locs, dataset_dir=dataset_dir, n_train=n_train, n_test=n_test, echo=o.echo,
              iia_unit=iia_unit)
    s = res.scores
    f = lambda x: "n/a" if x is None else f"{x:.4f}"
    o.echo(f"aligned {res.variable.aligned}: IIA {f(s['iia_aligned'])}; best node location {s['best_location']}; "
               f"localized: {s['localized']}; gap to best non-aligned ({s['best_non_aligned']}): {f(s['gap'])}")
    m = s["mib"]
    o.echo(f"MIB (IIA per {iia_unit}): mean over datasets and locations {f(m['mean_iia'])}; best {m['best_location']} "
           f"{f(m['best_iia'])}; true location {f(m['iia_true'])}; best is true: {m['best_is_true']}"
           + ("" if res.variable.separates is not False else f"  [does not separate featurizers: {res.variable.why}]"))
    _finish(results_doc(res, model_input(art), reproducible=reproducible), out, o)
