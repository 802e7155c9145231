"""``cbench submit FILE --report OUT``: check an edge-scores file against its case's graph, score
it, keep it in ``OUT/submissions/<name>/<case>.json`` and rebuild the site with it as a named entry.

Accepted files: a cbench edge-scores document (``"schema": "cbench/edge-scores/v1"``), or MIB's /
EAP-IG's graph JSON (``cfg``, ``nodes``, ``edges`` with ``score`` and ``in_graph``; no ``schema``),
which names no case, so ``--case`` says which.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cbench.errors import SchemaError, UsageError


@dataclass(frozen=True)
class Submission:
    name: str
    case: str
    path: Path  # where the submission is kept
    edge_auroc: float
    node_auroc: float
    index: Path  # the rebuilt leaderboard


def method_name(name: str) -> str:
    """A method name the edge-scores schema accepts (lower case, digits, ``_.-``) for an entry's name."""
    out = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-_.")[:64]
    return out if out else "submission"


def from_mib(doc: dict, case: str, name: str, config: dict, model_kind: str) -> dict:
    """A cbench edge-scores document from MIB's graph JSON (nodes as ``{name: bool}`` or
    ``{name: {"in_graph": bool}}``)."""
    from cbench.about import __version__

    nodes = {}
    for n, v in (doc.get("nodes") or {}).items():
        nodes[n] = {"in_graph": bool(v)} if isinstance(v, bool) else v
    cfg = dict(doc.get("cfg") or {})
    if "d_model" not in cfg and config.get("d_model") is not None:
        cfg["d_model"] = config["d_model"]
    return {"schema": "cbench/edge-scores/v1", "case": str(case), "model": {"repo": None, "revision": None, "kind": model_kind},
            "method": {"name": method_name(name), "hyperparameters": {}}, "data": {"split": "unknown", "n_examples": 1},
            "runtime_s": None, "cbench_version": __version__, "cfg": cfg, "nodes": nodes, "edges": doc.get("edges")}


def submit(file: str | Path, report_dir: str | Path, case: str | None = None, name: str | None = None,
           results_dir: str | Path | None = None, echo: Callable[[str], None] = print) -> Submission:
    from cbench.report.site import (
        _load_case,
        _no_signal,
        build_report,
        read_bench,
        score_doc,
        slug,
    )
    from cbench.schemas import check, read_json
    from cbench.scoring.ground_truth import check_edge_scores
    from cbench.scoring.report import write_bytes_atomic

    out = Path(report_dir)
    site_file = out / "site.json"
    site = read_json(site_file) if site_file.is_file() else {}
    if results_dir is None:
        if not site.get("results"):
            raise UsageError(f"{out}: no report there yet; build one with `cbench report RESULTS --html {out}` "
                             "or pass --results RESULTS (the bench results directory)")
        results_dir = site["results"]
    bench = read_bench(Path(results_dir))

    doc = read_json(file)
    if not isinstance(doc, dict):
        raise SchemaError(f"{file}: not an edge-scores file (a JSON object with cfg, nodes and edges)")
    if "schema" not in doc:
        if not all(k in doc for k in ("cfg", "nodes", "edges")):
            raise SchemaError(f"{file}: neither a cbench edge-scores document (no 'schema') nor MIB's graph "
                              "JSON (needs 'cfg', 'nodes' and 'edges')")
        if not case:
            raise UsageError(f"{file} is MIB's graph JSON, which names no case: say which with --case")
        fmt = "MIB graph JSON"
    else:
        if doc.get("schema") != "cbench/edge-scores/v1":
            raise SchemaError(f"{file}: a {doc.get('schema')!r} document, not edge scores (cbench/edge-scores/v1)")
        if case and str(doc.get("case")) != str(case):
            raise UsageError(f"{file} is for case {doc.get('case')!r}, not --case {case!r}")
        case = str(doc.get("case"))
        fmt = "cbench edge-scores"
    cases = list(bench["results"].get("auroc") or {})
    if case not in cases:
        raise UsageError(f"case {case!r} is not in the bench results of {results_dir} (cases: {', '.join(cases)})")
    info = _load_case(case, (bench["inputs"].get("models") or {}).get(case))
    if name is None:
        name = (doc.get("method") or {}).get("name") if fmt != "MIB graph JSON" else None
        if not name:
            raise UsageError("name the entry with --name (the file names no method)")
    if name in (bench["inputs"].get("methods") or []):
        raise UsageError(f"--name {name!r} is a method of the bench; choose another name for the submission")
    if fmt == "MIB graph JSON":
        doc = from_mib(doc, case, name, info.artifact.config, info.artifact.model_kind)
    doc = dict(doc, entry_name=name)  # the name as given (its directory holds only its slug)
    check(doc, "edge-scores", source=str(file))
    check_edge_scores(doc, info.artifact.graph, case=case, source=str(file))
    r = score_doc(info, doc, _no_signal(bench, case))
    dest = out / "submissions" / slug(name) / f"{slug(case)}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(dest, (json.dumps(doc, indent=1) + "\n").encode())
    echo(f"{file}: valid ({fmt}) for case {case} ({info.model}); edge AUROC {r.edge_auroc:.4f}; kept as {dest}")
    index = build_report(results_dir, out, against=site.get("against"), echo=echo, variables=site.get("variables"))
    return Submission(name, case, dest, r.edge_auroc, r.node_auroc, index)
