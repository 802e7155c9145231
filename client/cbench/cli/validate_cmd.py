"""``cbench validate FILE...``: check cbench JSON documents against their schemas.

The kind comes from each file's ``schema`` field, or from ``--schema``. ``--case DIR`` adds the
checks against a model's graph (DIR is a model artifact directory, or its config.json) for
edge-scores, circuit and circuits-at-sizes files. Exit status: 0 when every file is valid, 1
when any file has a violation or cannot be read, 2 for usage errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

import click

from cbench.errors import GraphError, SchemaError, UsageError

#: violations printed per file in text mode (``--json`` reports all)
MAX_PRINTED = 50


def load_case_graph(case_dir: str):
    """(graph, case id or None, d_model or None) of a model artifact directory or config.json."""
    from cbench.graph.graph import Graph
    from cbench.schemas import read_json

    p = Path(case_dir)
    if p.is_dir():
        config_path = p / "config.json"
        meta_path = p / "meta.json"
    elif p.is_file():
        config_path, meta_path = p, p.parent / "meta.json"
    else:
        raise UsageError(f"--case {case_dir}: no such directory (give a model artifact directory holding "
                         "config.json, e.g. the path `cbench pull` prints)")
    if not config_path.is_file():
        raise UsageError(f"--case {case_dir}: {config_path.name} not found there; --case takes a model "
                         "artifact directory (with config.json)")
    try:
        config = read_json(config_path)
    except SchemaError as exc:
        raise UsageError(f"--case: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"--case: {config_path} is not a JSON object")
    for key in ("n_layers", "n_heads"):
        value = config.get(key)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise UsageError(f"--case: {config_path} has no usable {key!r} (got {value!r})")
    try:
        graph = Graph.from_config(config)
    except GraphError as exc:
        raise UsageError(f"--case: {config_path}: {exc}") from None
    d_model = config.get("d_model") if isinstance(config.get("d_model"), int) else None
    case = None
    if meta_path.is_file():
        try:
            meta = read_json(meta_path)
            if isinstance(meta, dict) and isinstance(meta.get("case"), str):
                case = meta["case"]
        except SchemaError:
            pass  # the case id is a courtesy check; the graph is what matters
    return graph, case, d_model


def run_validate(files: Sequence[str], schema: str | None = None, case_dir: str | None = None):
    """The command's core: a list of :class:`~cbench.schemas.FileReport`, one per file.

    Raises :class:`~cbench.errors.UsageError` only for bad arguments (unknown kind, bad --case).
    """
    from cbench.schemas import _kind_name, validate_file

    if not files:
        raise UsageError("give at least one FILE to validate (see `cbench validate --help`)")
    kind = _kind_name(schema) if schema else None
    graph = case = d_model = None
    if case_dir is not None:
        graph, case, d_model = load_case_graph(case_dir)
    return [_mib_hook(f, kind, graph, case, d_model, case_dir)
            or validate_file(f, kind=kind, graph=graph, case=case, d_model=d_model) for f in files]


def _mib_hook(path, kind, graph, case, d_model, case_dir):
    """A MIB/EAP-IG graph file (no cbench metadata) is checked as the --case model's edge scores."""
    if kind not in (None, "edge-scores"):
        return None
    from cbench.artifacts.mib_format import validate_mib_file

    model_kind = None
    if case_dir is not None:
        meta_path = Path(case_dir) / "meta.json" if Path(case_dir).is_dir() else Path(case_dir).parent / "meta.json"
        try:
            model_kind = json.loads(meta_path.read_text()).get("model_kind")
        except (OSError, ValueError, AttributeError):
            pass
    return validate_mib_file(path, graph, case, d_model, model_kind)


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
