"""``cbench validate FILE...``: check cbench JSON documents against their schemas.

The kind comes from each file's ``schema`` field, or from ``--schema``. ``--case DIR`` adds the
checks against a model's graph (DIR is a model artifact directory, or its config.json) for
edge-scores, circuit and circuits-at-sizes files. Exit status: 0 when every file is valid, 1
when any file has a violation or cannot be read, 2 for usage errors.
"""

from __future__ import annotations

import json
import sys

import click

from cbench.api.validation import load_case_graph, run_validate  # noqa: F401  (the command's core)

#: violations printed per file in text mode (``--json`` reports all)
MAX_PRINTED = 50


def render_text(reports) -> tuple[str, int]:
    lines: list[str] = []
    for r in reports:
        if r.error is not None:
            lines.append(f"{r.path}: error: {r.error}")
        elif r.valid:
            lines.append(f"{r.path}: OK ({r.kind})")
        else:
            n = len(r.violations)
            lines.append(f"{r.path}: {n} violation{'s' if n != 1 else ''} ({r.kind})")
            for v in r.violations[:MAX_PRINTED]:
                lines.append(f"  {v.path}: {v.message}")
            if n > MAX_PRINTED:
                lines.append(f"  ... and {n - MAX_PRINTED} more (--json lists every one)")
    bad = sum(1 for r in reports if not r.valid)
    if len(reports) > 1:
        lines.append(f"{len(reports)} files: {len(reports) - bad} valid, {bad} invalid")
    return "\n".join(lines), (1 if bad else 0)


def render_json(reports) -> tuple[str, int]:
    bad = sum(1 for r in reports if not r.valid)
    report = {"files": [r.to_dict() for r in reports], "valid": bad == 0}
    return json.dumps(report, indent=2, ensure_ascii=True), (1 if bad else 0)


def _kinds():
    from cbench.schemas import SCHEMA_KINDS

    return SCHEMA_KINDS


@click.command("validate")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option("--schema", "schema", type=click.Choice(_kinds()), default=None,
              help="Validate as this kind instead of the kind each file's 'schema' field names.")
@click.option("--case", "case_dir", metavar="DIR", default=None,
              help="Model artifact directory (with config.json): also check names, sizes and cfg "
                   "against that model's graph.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def validate(files, schema, case_dir, as_json):
    """Validate cbench JSON files against their schemas.

    Prints OK or every violation with its JSON path; exits 1 if any file is invalid.
    """
    reports = run_validate(files, schema=schema, case_dir=case_dir)
    text, code = (render_json if as_json else render_text)(reports)
    # lone surrogates (from undecodable file names or JSON escapes) cannot be printed as is
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        click.echo(text)
    except UnicodeEncodeError:  # a terminal that cannot print the file's characters
        sys.stdout.write(text.encode("ascii", "backslashreplace").decode("ascii") + "\n")
    if code:
        sys.exit(code)
