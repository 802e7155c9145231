"""``cbench demo``: the main job on the embedded local hub, as `make demo` runs it.

Seeds the per-user hub from ``model_zoo/releases`` (first use only), pulls the demo cases through
the Hugging Face protocol (olah on loopback), runs ``cbench bench`` on them with every method of the bench
(100 pairs per case), prints the AUROC table once and writes the HTML report. Every step is the
real command path; the demo only chooses small defaults, runs the (case, method) tasks on one
worker process per CPU (``--workers``; the results are those of a serial run) and leaves the
figures to the report, so it finishes in about a minute on two CPU cores. Every step shows its progress on standard error: k of N and an ETA for the pulls, the
models x methods and the report's pages (one line per finished unit when standard error is not
a terminal).
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from cbench.cli.options import check_not_empty, check_out_dir
from cbench.cli.output import Output, json_option

DEMO_OUT = "results/demo"
DEMO_CASES = "3,4,8,11,13,18,19,20,21,26,29,33,34,35,36,37"


@click.command("demo")
@click.option("--cases", default=DEMO_CASES, show_default=True, help="comma-separated case ids")
@click.option("--methods", default=None, callback=check_not_empty, help="comma-separated discovery methods (default: every method of the bench)")
@click.option("--out", "out_dir", default=DEMO_OUT, show_default=True, type=click.Path(file_okay=False),
              callback=lambda ctx, param, value: value if value == DEMO_OUT else check_out_dir(ctx, param, value),
              help="results directory (its parent must exist, except for the default's)")
@click.option("--n-examples", type=click.IntRange(2, 100_000), default=100, show_default=True)
@click.option("--workers", type=click.IntRange(1, 4096), default=None,
              help="worker processes for the (case, method) tasks [default: one per CPU]")
@json_option
def demo(cases, methods, out_dir, n_examples, workers, as_json):
    """Pull the demo cases from the embedded hub, run the benchmark on them, print the table."""
    import os

    from cbench.hub.pull import pull
    from cbench.report import build_report
    from cbench.runtime.threads import use_cpu_threads
    from cbench.scoring.bench import run_bench
    from cbench.scoring.executor import make_executor
    from cbench.scoring.progress import Progress

    o = Output(as_json)  # --json: the lines below go to standard error, the bench's results.json to standard output
    echo = o.echo
    shows = "off" if as_json else "auto"  # progress (k of N, ETA) on standard error; none with --json
    t0 = time.perf_counter()
    if out_dir == DEMO_OUT:
        Path(out_dir).parent.mkdir(exist_ok=True)
    ids = [c.strip() for c in cases.split(",") if c.strip()]
    echo(f"== pulling the counterfactual pairs and {len(ids)} cases from the embedded hub")
    with Progress(len(ids) + 1, "pull", mode=shows, echo=echo) as prog:
        prog.start("cbench/counterfactuals")
        snap = pull("counterfactuals", repo_type="dataset")
        prog.done(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}  {snap.path}")
        for case in ids:
            prog.start(f"case-{case}")
            snap = pull(f"case-{case}")
            prog.done(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}  {snap.path}")
    shown = f" --methods {methods}" if methods else ""
    echo(f"== cbench bench --cases {cases}{shown} --out {out_dir}")
    t_bench = time.perf_counter()
    use_cpu_threads()  # one torch thread per process, as `cbench bench`: the same numbers
    if workers is None:  # the CPUs this process may run on
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    executor = make_executor("local", workers=workers)
    doc = run_bench(cases, methods, out_dir, n_examples=n_examples, sampled=False, seed=0, echo=echo,
                    progress=shows, executor=None if executor.name == "local" else executor,
                    figures=False)  # the table is printed once, by the bench; the figures by the report
    html_dir = Path(out_dir) / "html"
    echo(f"== cbench report {out_dir} --html {html_dir}")
    t_report = time.perf_counter()
    index = build_report(out_dir, html_dir, echo=echo, progress=shows)
    t_end = time.perf_counter()
    echo(f"== demo finished in {t_end - t0:.0f} s (pulls {t_bench - t0:.0f} s, bench {t_report - t_bench:.0f} s, "
         f"report {t_end - t_report:.0f} s); results in {out_dir}/")
    echo(f"HTML report: {index.resolve()}")
    if as_json:
        o.emit(dict(doc, demo={"results": str(Path(out_dir).resolve()), "html": str(index.resolve())}))
