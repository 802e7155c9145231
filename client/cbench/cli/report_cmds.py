"""``cbench report`` (bench results as a static HTML site) and ``cbench submit`` (add an
edge-scores file to that site's leaderboard)."""

from __future__ import annotations

import click

from cbench.cli.options import check_out_dir_parents
from cbench.cli.output import Output, json_option


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
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--report", "report_dir", required=True, type=click.Path(file_okay=False),
              help="the site made by `cbench report` (the submission is kept there)")
@click.option("--case", default=None, help="the case of a file that names none (MIB graph JSON)")
@click.option("--name", default=None, help="the entry's name on the leaderboard [default: the file's method]")
@click.option("--results", "results_dir", default=None, type=click.Path(file_okay=False, exists=True),
              help="the bench results directory [default: the one the site was built from]")
@json_option
def submit(file, report_dir, case, name, results_dir, as_json):
    """Check an edge-scores file (cbench or MIB format) against its case's graph, score it and add it
    to the leaderboard as a named entry; prints the path of the rebuilt index.html."""
    from cbench.report import submit as do_submit

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
