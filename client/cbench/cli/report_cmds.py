"""``cbench report`` (bench results as a static HTML site) and ``cbench submit`` (add an
edge-scores file to that site's leaderboard)."""

from __future__ import annotations

import click

from cbench.cli.options import check_out_dir_parents
from cbench.cli.output import Output, json_option
from cbench.errors import UsageError


@click.command("report")
@click.argument("results", type=click.Path(file_okay=False, exists=True))
@click.option("--html", "out_dir", required=True, type=click.Path(file_okay=False), callback=check_out_dir_parents,
              help="directory of the site (index.html, cases/, methods/, img/): new, empty, or an earlier "
                   "report; created with its missing parents, which the command names")
@click.option("--against", default=None, help="the method p-values and A12 compare with [default: acdc]")
@click.option("--variables", default=None, type=click.Path(exists=True),
              help="the results of `cbench bench --track causal-variables --out DIR` (DIR or its results.json): "
                   "adds the featurizer leaderboard (featurizers.html)")
@json_option
def report(results, out_dir, against, variables, as_json):
    """Turn the results of `cbench bench --out RESULTS` (and the submissions kept in the site)
    into a static site that works from file://; prints the path of its index.html."""
    from cbench.report import build_report

    index = build_report(results, out_dir, against=against, echo=lambda s: click.echo(s, err=True),
                         progress="off" if as_json else "auto", variables=variables)
    if as_json:
        Output(True).emit({"index": str(index.resolve()), "site": str(index.resolve().parent),
                           "results": str(results)})
        return
    click.echo(str(index.resolve()))


@click.command("submit")
@click.argument("file", type=click.Path(exists=True))
@click.option("--report", "report_dir", default=None, type=click.Path(file_okay=False),
              help="the site made by `cbench report` (the submission is kept there); not with a MIB submission "
                   "directory")
@click.option("--case", default=None, help="the case of a file that names none (MIB graph JSON)")
@click.option("--name", default=None, help="the entry's name on the leaderboard [default: the file's method]")
@click.option("--results", "results_dir", default=None, type=click.Path(file_okay=False, exists=True),
              help="the bench results directory [default: the one the site was built from]")
@json_option
def submit(file, report_dir, case, name, results_dir, as_json):
    """Check an edge-scores file (cbench or MIB format) against its case's graph, score it and add it
    to the leaderboard as a named entry; prints the path of the rebuilt index.html. FILE a
    directory: check it as a MIB circuit-track leaderboard submission (one <task>_<model> folder
    per pair, each with importances.json) and list what it holds."""
    from pathlib import Path

    from cbench.report import submit as do_submit

    if Path(file).is_dir():
        _check_mib_submission(file, report_dir or case or name or results_dir, as_json)
        return
    if report_dir is None:
        raise UsageError("--report is required with an edge-scores file (the site made by `cbench report`)")

    sub = do_submit(file, report_dir, case=case, name=name, results_dir=results_dir,
                    echo=lambda s: click.echo(s, err=True))
    if as_json:
        import math

        finite = lambda x: None if x is None or not math.isfinite(x) else x
        Output(True).emit({"name": sub.name, "case": sub.case, "edge_auroc": finite(sub.edge_auroc),
                           "node_auroc": finite(sub.node_auroc), "kept": str(sub.path),
                           "index": str(sub.index.resolve())})
        return
    click.echo(str(sub.index.resolve()))


def _check_mib_submission(directory: str, other_options, as_json: bool) -> None:
    from cbench.artifacts.mib_submission import read_submission

    if other_options:
        raise UsageError("a MIB submission directory is checked on its own: --report, --case, --name and --results "
                         "go with an edge-scores file")
    entries = read_submission(directory)
    if as_json:
        Output(True).emit({"submission": str(directory), "format": "mib-circuit-track", "folders": [
            {"folder": e.folder, "task": e.task, "model": e.model, "file": str(e.path), "edges": e.n_edges,
             "scored_edges": e.n_scored} for e in entries]})
        return
    click.echo(f"{directory}: a valid MIB circuit-track submission ({len(entries)} task/model folders, "
               f"{len({e.model for e in entries})} models, {len({e.task for e in entries})} tasks)")
    for e in entries:
        click.echo(f"  {e.folder}: {e.n_edges:,} edges, {e.n_scored:,} scored")
