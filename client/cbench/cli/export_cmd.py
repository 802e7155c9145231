"""``cbench export``: write a cbench edge-scores file in another tool's format.

``--format mib`` writes MIB's submission format, the JSON that EAP-IG's ``Graph.to_json`` writes
and ``Graph.from_json`` reads (``cfg``, ``nodes``, ``edges``; see :mod:`cbench.artifacts.mib_format`).
"""

from __future__ import annotations

import json

import click

from cbench.cli.output import Output, check_out_or_stdout


def _check_out_place(ctx, param, value):
    """Parse-time check of --out for either format: standard output, or a path under an existing
    directory cbench can write in (the format's own check follows in the command)."""
    import os
    from pathlib import Path

    from cbench.files.safe_io import check_writable

    if value is None or value == "-":
        return value
    if not str(value).strip() or "\0" in str(value):
        raise click.BadParameter("give a file or directory name", param=param)
    from cbench.errors import UsageError

    given = Path(value)
    if given.exists() and not (given.is_file() or given.is_dir()):
        raise UsageError(f"--out {value} is neither a regular file nor a directory; cbench writes only new or "
                         "regular files (or, for mib-submission, into a directory)")
    above = Path(os.path.abspath(value))
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.is_dir():
        check_writable(above, "--out", value)
    return value


@click.command("export")
@click.argument("scores", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["mib", "mib-submission"]), default="mib", show_default=True,
              help="mib: MIB/EAP-IG graph JSON (Graph.from_json loads it); mib-submission: the scores of a run on "
                   "one of MIB's models as the folder <task>_<model>/importances.json of the leaderboard "
                   "submission directory --out (with --task and --mib-model)")
@click.option("--out", "out", required=True, metavar="FILE|DIR|-", callback=_check_out_place,
              help="the file to write ('-': standard output); mib-submission: the submission directory")
@click.option("--d-model", type=click.IntRange(1, 1_000_000), default=None,
              help="the model's d_model when the scores file's cfg lacks it")
@click.option("--task", "mib_task", default=None,
              help="mib-submission: MIB's task (ioi, mcqa, arithmetic-addition, arithmetic-subtraction, arc-easy, "
                   "arc-challenge)")
@click.option("--mib-model", default=None, help="mib-submission: MIB's model (gpt2, qwen2.5, gemma2, llama3)")
def export(scores, fmt, out, d_model, mib_task, mib_model):
    """Write the edge-scores file SCORES as a MIB/EAP-IG graph file, or into a MIB leaderboard
    submission directory (read it back with `cbench submit DIR`)."""
    from cbench.errors import SchemaError, UsageError
    from cbench.artifacts.mib_format import to_mib
    from cbench.scoring.report import write_bytes_atomic
    from cbench.files.safe_io import refuse_input_as_output
    from cbench.schemas import read_json, validate

    if (fmt == "mib-submission") != (mib_task is not None and mib_model is not None) or \
            (fmt == "mib" and (mib_task or mib_model)):
        raise UsageError("--format mib-submission needs --task and --mib-model, and only it takes them")
    if fmt == "mib-submission":
        from cbench.files.safe_io import output_tree

        if out == "-":
            raise UsageError("--format mib-submission writes a directory; give --out DIR")
        output_tree(out)  # new or a directory, somewhere cbench can write: checked before any work
    else:
        ctx = click.get_current_context()
        out = check_out_or_stdout(ctx, next(p for p in ctx.command.params if p.name == "out"), out)
    refuse_input_as_output([("--out", out)], [("SCORES", scores)])
    doc = read_json(scores)
    violations = validate(doc, "edge-scores")
    if violations:
        v = violations[0]
        raise SchemaError(f"{scores}: {v.path}: {v.message}"
                          + (f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""))
    if fmt == "mib-submission":
        from cbench.artifacts.mib_submission import write_entry

        path = write_entry(doc, mib_task, mib_model, out)
        Output(out=out).echo(f"{len(doc['edges'])} edges written to {path}")
        return
    graph_doc = to_mib(doc, d_model=d_model)
    o = Output(out=out)
    if o.machine:  # --out -: the graph JSON on standard output
        click.echo(json.dumps(graph_doc))
    else:
        write_bytes_atomic(out, json.dumps(graph_doc).encode("utf-8"))
    o.echo(f"{len(graph_doc['edges'])} edges written to {out if not o.machine else 'standard output'} "
           f"({fmt} graph JSON)")
