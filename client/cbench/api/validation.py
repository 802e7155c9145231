"""``cbench.validate``: cbench JSON files checked against their schemas (``cbench validate``).

The kind of each file comes from its ``schema`` field, or from ``schema=``. ``case=`` (a model
artifact directory or its config.json) adds the checks against that model's graph for
edge-scores, circuit and circuits-at-sizes files; a MIB/EAP-IG graph file is then checked as the
model's edge scores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from cbench.api.results import ValidationResult
from cbench.errors import GraphError, SchemaError, UsageError


def validate(*files: str | os.PathLike, schema: str | None = None,
             case: str | os.PathLike | None = None) -> ValidationResult:
    """Validate each of ``files``; never raises for a bad file (its problems are in the result),
    only for bad arguments (no file, an unknown ``schema`` kind, an unusable ``case``).

    >>> cbench.validate("scores.json", case="path/to/case-3").valid   # doctest: +SKIP
    True
    """
    if len(files) == 1 and isinstance(files[0], (list, tuple)):
        files = tuple(files[0])
    reports = run_validate([str(f) for f in files], schema=schema,
                           case_dir=None if case is None else str(case))
    bad = sum(1 for r in reports if not r.valid)
    return ValidationResult(valid=bad == 0, files=tuple(reports),
                            document={"files": [r.to_dict() for r in reports], "valid": bad == 0})


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
