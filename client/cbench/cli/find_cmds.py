"""``cbench find ...``: FIND function-interpretation problems (issue 22).

    cbench find list [--config numeric|strings]          ids only, never answers
    cbench find call ID INPUT...                          the black-box runner
    cbench find score SUBMISSIONS.jsonl [--out R.json]    sandboxed scoring
    cbench find baseline [--out SUBMISSIONS.jsonl]        the no-LM baseline interpreter
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cbench.cli.options import SEED_TYPE, FiniteFloatRange, check_not_empty, check_out
from cbench.errors import UsageError
from cbench.find.limits import BOUNDS, Limits

#: --limit of find baseline: a number of functions
MAX_FUNCTIONS = 1_000_000

_SUITE = click.option("--suite", "suite_dir", type=click.Path(path_type=Path), default=None,
                      help="a local FIND suite directory (default: pull cbench/find from the hub)")
_REVISION = click.option("--revision", default=None, callback=check_not_empty, help="version of cbench/find to pull, e.g. v1.0.0")


def _load(suite_dir, revision):
    from cbench.find.suite import load_suite

    if suite_dir is not None and revision is not None:
        raise UsageError("give --suite or --revision, not both")
    if suite_dir is not None and not Path(suite_dir).is_dir():
        raise UsageError(f"--suite {suite_dir}: no such directory")
    return load_suite(suite_dir, revision=revision)


@click.group("find")
def find():
    """FIND: black-box functions with known answers, for evaluating interpreters."""


@find.command("list")
@click.option("--config", type=click.Choice(["numeric", "strings"]), default=None)
@click.option("--json", "as_json", is_flag=True, help="print a JSON list of {id, config}")
@_SUITE
@_REVISION
def list_cmd(config, suite_dir, revision, as_json):
    """List function ids (one per line, with their config)."""
    suite = _load(suite_dir, revision)
    if as_json:
        click.echo(json.dumps([{"id": fid, "config": suite.functions[fid].config} for fid in suite.ids(config)]))
        return
    for fid in suite.ids(config):
        click.echo(f"{fid}\t{suite.functions[fid].config}")


@find.command("call", context_settings={"ignore_unknown_options": True})
@click.argument("function_id")
@click.argument("inputs", nargs=-1, type=click.UNPROCESSED)
@click.option("--seed", type=SEED_TYPE, default=None, help="seed the per-call noise (default: fresh noise)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list of [input, output] pairs")
@_SUITE
@_REVISION
def call_cmd(function_id, inputs, seed, as_json, suite_dir, revision):
    """Evaluate a function on INPUTS without revealing it (numbers or strings, as it takes).

    Prints `(input, output)` pairs like FIND's function scripts; `None` where a numeric
    function is undefined. Numeric functions get fresh noise on every call."""
    if not inputs:
        raise UsageError("give at least one input, e.g. `cbench find call n0001 -- -3 0 2.5`")
    inputs = [i for i in inputs if i != "--"]
    suite = _load(suite_dir, revision)
    outs = suite.call(function_id, list(inputs), seed=seed)
    if as_json:
        click.echo(json.dumps([[i, o] for i, o in zip(inputs, outs)]))
    else:
        click.echo(" ".join(f"({i}, {o})" for i, o in zip(inputs, outs)))


@find.command("score")
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None, callback=check_out,
              help="write the results JSON here")
@click.option("--all", "all_functions", is_flag=True, help="count functions missing from the submission as failures")
@click.option("--wall-s", type=FiniteFloatRange(*BOUNDS["wall_s"], min_open=True), default=Limits.wall_s,
              show_default=True, help="wall-clock limit per function, in seconds")
@click.option("--cpu-s", type=click.IntRange(*BOUNDS["cpu_s"]), default=Limits.cpu_s, show_default=True,
              help="CPU-time limit per function, in seconds")
@click.option("--memory-mb", type=click.IntRange(*BOUNDS["memory_mb"]), default=Limits.memory_mb, show_default=True,
              help="address-space limit per function, in MiB")
@click.option("--json", "as_json", is_flag=True, help="print the results document instead of the table")
@click.option("--trust-code", is_flag=True,
              help="if the OS sandbox (bubblewrap) cannot be set up, run the code without it; only for code you trust")
@_SUITE
@_REVISION
def score_cmd(submissions, out, all_functions, wall_s, cpu_s, memory_mb, as_json, trust_code, suite_dir, revision):
    """Score SUBMISSIONS (JSON Lines: {"id", "code", "interval"?}) in the sandbox."""
    from cbench.artifacts.serialization import write_json
    from cbench.files.safe_io import refuse_input_as_output
    from cbench.find.limits import check_limits
    from cbench.find.scoring import format_table, read_submission_file, score
    from cbench.schemas import validate

    refuse_input_as_output([("--out", out)], [("SUBMISSIONS", submissions)])
    limits = check_limits(Limits(wall_s=wall_s, cpu_s=cpu_s, memory_mb=memory_mb))
    submission = read_submission_file(submissions)  # read once: what is scored is what is hashed
    suite = _load(suite_dir, revision)
    results = score(suite, submission, limits=limits, all_functions=all_functions, trust_code=trust_code)
    problems = validate(results, "find-results")
    if problems:  # a bug, not a user error: say so plainly
        raise RuntimeError("results do not satisfy find-results: " + "; ".join(map(str, problems[:5])))
    if out is not None:
        write_json(out, results)
    click.echo(json.dumps(results, indent=2, sort_keys=True) if as_json else format_table(results))
    if out is not None and not as_json:
        click.echo(f"results: {out}", err=True)


@find.command("baseline")
@click.option("--out", type=click.Path(path_type=Path), default=None, callback=check_out,
              help="write the submission (JSON Lines) here (default: stdout)")
@click.option("--config", type=click.Choice(["numeric", "strings"]), default=None, help="only this config")
@click.option("--ids", default=None, help="comma-separated function ids")
@click.option("--limit", type=click.IntRange(1, MAX_FUNCTIONS), default=None,
              help="only the first N functions (after --config/--ids)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True, help="seeds the black boxes' noise")
@_SUITE
@_REVISION
def baseline_cmd(out, config, ids, limit, seed, suite_dir, revision):
    """Run the no-language-model baseline interpreter and write its submission."""
    import time

    from cbench.find.baseline import run_baseline

    suite = _load(suite_dir, revision)
    chosen = suite.ids(config)
    if ids:
        wanted = [i.strip() for i in ids.split(",") if i.strip()]
        for i in wanted:
            suite.get(i)  # a clear error for an unknown id
        chosen = [i for i in wanted if config is None or suite.functions[i].config == config]
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        raise UsageError("no functions chosen")
    t0 = time.process_time()
    entries = run_baseline(suite, chosen, seed=seed)
    text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries)
    if out is None:
        sys.stdout.write(text)
    else:
        from cbench.files.safe_io import write_output

        write_output(out, text.encode("utf-8"))
        click.echo(f"wrote {len(entries)} entries to {out} ({time.process_time() - t0:.1f} CPU s)", err=True)
