"""``cbench report`` (bench results as a static HTML site) and ``cbench submit`` (add an
edge-scores file to that site's leaderboard)."""

from __future__ import annotations

import click

from cbench.cli.options import check_out_dir


@click.command("report")
@click.argument("results", type=click.Path(file_okay=False, exists=True))
@click.option("--html", "out_dir", required=True, type=click.Path(file_okay=False), callback=check_out_dir,
              help="directory of the site (index.html, cases/, methods/, img/): new, empty, or an earlier "
                   "report; its parent must exist")
@click.option("--against", default=None, help="the method p-values and A12 compare with [default: acdc]")
def report(results, out_dir, against):
    """Turn the results of `cbench bench --out RESULTS` (and the submissions kept in the site)
    into a static site that works from file://; prints the path of its index.html."""
    from cbench.report import build_report

    index = build_report(results, out_dir, against=against, echo=lambda s: click.echo(s, err=True))
    click.echo(str(index.resolve()))


@click.command("submit")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--report", "report_dir", required=True, type=click.Path(file_okay=False),
              help="the site made by `cbench report` (the submission is kept there)")
@click.option("--case", default=None, help="the case of a file that names none (MIB graph JSON)")
@click.option("--name", default=None, help="the entry's name on the leaderboard [default: the file's method]")
@click.option("--results", "results_dir", default=None, type=click.Path(file_okay=False, exists=True),
              help="the bench results directory [default: the one the site was built from]")
def submit(file, report_dir, case, name, results_dir):
    """Check an edge-scores file (cbench or MIB format) against its case's graph, score it and add it
    to the leaderboard as a named entry; prints the path of the rebuilt index.html."""
    from cbench.report import submit as do_submit

    sub = do_submit(file, report_dir, case=case, name=name, results_dir=results_dir,
                    echo=lambda s: click.echo(s, err=True))
    click.echo(str(sub.index.resolve()))
