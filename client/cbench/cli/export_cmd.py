"""``cbench export``: write a cbench edge-scores file in another tool's format.

``--format mib`` writes MIB's submission format, the JSON that EAP-IG's ``Graph.to_json`` writes
and ``Graph.from_json`` reads (``cfg``, ``nodes``, ``edges``; see :mod:`cbench.artifacts.mib_format`).
"""

from __future__ import annotations

import json

import click

from cbench.cli.output import Output, out_option


@click.command("export")
@click.argument("scores", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["mib"]), default="mib", show_default=True,
              help="mib: MIB/EAP-IG graph JSON (Graph.from_json loads it)")
@out_option("the file to write", required=True)
@click.option("--d-model", type=click.IntRange(1, 1_000_000), default=None,
              help="the model's d_model when the scores file's cfg lacks it")
def export(scores, fmt, out, d_model):
    """Write the edge-scores file SCORES as a MIB/EAP-IG graph file."""
    from cbench.errors import SchemaError
    from cbench.artifacts.mib_format import to_mib
    from cbench.scoring.report import write_bytes_atomic
    from cbench.files.safe_io import refuse_input_as_output
    from cbench.schemas import read_json, validate

    refuse_input_as_output([("--out", out)], [("SCORES", scores)])
    doc = read_json(scores)
    violations = validate(doc, "edge-scores")
    if violations:
        v = violations[0]
        raise SchemaError(f"{scores}: {v.path}: {v.message}"
                          + (f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""))
    graph_doc = to_mib(doc, d_model=d_model)
    o = Output(out=out)
    if o.machine:  # --out -: the graph JSON on standard output
        click.echo(json.dumps(graph_doc))
    else:
        write_bytes_atomic(out, json.dumps(graph_doc).encode("utf-8"))
    o.echo(f"{len(graph_doc['edges'])} edges written to {out if not o.machine else 'standard output'} "
           f"({fmt} graph JSON)")
