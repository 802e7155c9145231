"""MIB / EAP-IG graph files: read them as cbench edge scores, write cbench scores as them.

EAP-IG's ``Graph.to_json`` (MIB's submission format) writes one JSON object with exactly three
keys:

* ``cfg``: the model's graph shape, ``{"n_layers", "n_heads", "parallel_attn_mlp", "d_model"}``;
* ``nodes``: ``{name: {"in_graph": bool}}`` for every node (``input``, ``a{L}.h{H}``, ``m{L}``,
  ``logits``), plus ``"score"`` when the graph has node scores (``NaN`` for a node that was not
  scored) and ``"neurons"`` / ``"neurons_scores"`` lists for neuron-level graphs;
* ``edges``: ``{name: {"score": float, "in_graph": bool}}`` for every edge, named as cbench names
  them (``input->a0.h1<q>``, ``a0.h1->m1``, ``m1->logits``).

A cbench ``edge-scores`` document is that object plus five fields saying what it is
(``schema``, ``case``, ``model``, ``method``, ``data``). :func:`is_mib_graph` recognises a bare
MIB file, :func:`from_mib` adds the five fields (the case and model from the artifact it is
scored against, the method and data from the caller or as ``"unknown"`` placeholders), and
:func:`to_mib` strips a cbench document back to EAP-IG's layout, so ``Graph.from_json`` loads
it and ``Graph.to_json`` output comes back unchanged in its three keys.

EAP-IG graphs always have MLP nodes; for an attention-only cbench model the MLP nodes and edges of
a MIB file are dropped when they carry nothing (not in the graph, score 0), and are an error
otherwise.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from cbench.errors import SchemaError, UsageError

MIB_KEYS = ("cfg", "nodes", "edges")
CFG_KEYS = ("n_layers", "n_heads", "parallel_attn_mlp", "d_model")
EDGE_SCORES_SCHEMA = "cbench/edge-scores/v1"
UNKNOWN_METHOD = "unknown"


def is_mib_graph(doc: Any) -> bool:
    """True for an EAP-IG/MIB graph object without cbench's ``schema`` field."""
    return isinstance(doc, Mapping) and "schema" not in doc and all(k in doc for k in MIB_KEYS) \
        and isinstance(doc.get("edges"), Mapping) and isinstance(doc.get("nodes"), Mapping)


def read_graph_json(path: str | os.PathLike) -> Any:
    """A JSON file as :func:`cbench.schemas.read_json` reads it, except that a MIB graph file
    may hold ``NaN`` node scores (EAP-IG writes them for unscored nodes); they become ``None``."""
    from cbench.schemas import read_json

    try:
        return read_json(path)
    except SchemaError as exc:
        if "NaN" not in str(exc):
            raise
        first = exc
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise first from None  # the first error is the clearer one
    if not is_mib_graph(doc):
        raise SchemaError(f"{path}: NaN is not JSON; only a MIB graph file's node scores may be NaN")
    for name, node in doc["nodes"].items():
        if isinstance(node, dict) and isinstance(node.get("score"), float) and math.isnan(node["score"]):
            node["score"] = None
    for name, edge in doc["edges"].items():
        if isinstance(edge, dict) and isinstance(edge.get("score"), float) and not math.isfinite(edge["score"]):
            raise SchemaError(f"{path}: edge {name!r} has score {edge['score']!r}; every edge score must be finite")
    return doc


def model_fields(artifact) -> dict:
    """``graph``, ``case`` and ``model`` of a :class:`~cbench.artifacts.model.ModelArtifact`, as
    :func:`from_mib` takes them."""
    return {"graph": artifact.graph, "case": artifact.case,
            "model": {"repo": None, "revision": None, "kind": artifact.model_kind, "path": str(artifact.path)}}


def from_mib(doc: Mapping, graph, case: str, model: Mapping, *, method: str | None = None,
             hyperparameters: Mapping | None = None, split: str | None = None, n_examples: int | None = None,
             source: str = "MIB graph file") -> dict:
    """The cbench edge-scores document for a MIB graph ``doc`` of the model ``graph`` of ``case``.

    ``model`` is a cbench model reference (``repo``, ``revision``, ``kind``); ``method`` and
    ``data`` come from the arguments, else ``"unknown"`` placeholders (a MIB file does not record
    them). Neuron-level entries are dropped (cbench scores edges)."""
    if not is_mib_graph(doc):
        raise UsageError(f"{source} is not a MIB/EAP-IG graph file (a JSON object with cfg, nodes and edges)")
    unknown = [k for k in doc if k not in MIB_KEYS]
    if unknown:
        raise SchemaError(f"{source}: unknown top-level key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}; a MIB/EAP-IG graph file has only cfg, nodes and edges")
    nodes: dict[str, dict] = {}
    for name, entry in doc["nodes"].items():
        if isinstance(entry, bool):  # EAP-IG's older layout: {name: in_graph}
            entry = {"in_graph": entry}
        if not isinstance(entry, Mapping):
            raise SchemaError(f"{source}: $.nodes[{name!r}] is not an object")
        if not graph.has_node(name) and _dropped_mlp(graph, name, entry):
            continue
        out = {"in_graph": entry.get("in_graph")}
        if entry.get("score") is not None:
            out["score"] = _checked_score(entry["score"], f"$.nodes[{name!r}].score", source)
        nodes[name] = out
    missing = [n.name for n in graph.nodes if n.name not in nodes]
    if missing:
        raise SchemaError(f"{source}: $.nodes lacks {len(missing)} node{'s' if len(missing) > 1 else ''} of the "
                          f"model's graph ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
                          "EAP-IG's Graph.to_json writes every node")
    if "logits" in nodes and nodes["logits"]["in_graph"] is False:
        raise SchemaError(f"{source}: $.nodes['logits'].in_graph is false; the logits node is always in the graph")
    edges: dict[str, dict] = {}
    for name, entry in doc["edges"].items():
        if not isinstance(entry, Mapping):
            raise SchemaError(f"{source}: $.edges[{name!r}] is not an object")
        if not graph.has_edge(name) and _dropped_mlp(graph, name, entry):
            continue
        score = entry.get("score")
        if score is None and "score" in entry:  # EAP-IG's older layout: an unscored edge
            score = 0.0
        elif score is not None:
            score = _checked_score(score, f"$.edges[{name!r}].score", source)
        edges[name] = {"score": score, "in_graph": entry.get("in_graph")}
        if entry.get("in_graph") is True:
            parent, child = name.split("->", 1) if "->" in name else (name, "")
            for end in (parent, child.split("<", 1)[0]):
                if end != "logits" and end in nodes and nodes[end]["in_graph"] is not True:
                    raise SchemaError(f"{source}: edge {name!r} is in the graph but its node {end!r} is not")
    cfg = dict(doc["cfg"]) if isinstance(doc["cfg"], Mapping) else doc["cfg"]
    if isinstance(cfg, dict) and not graph.has_mlp:
        cfg.setdefault("has_mlp", False)
    return {
        "schema": EDGE_SCORES_SCHEMA,
        "case": str(case),
        "model": dict(model),
        "method": {"name": method or UNKNOWN_METHOD, "hyperparameters": dict(hyperparameters or {}),
                   "origin": "mib-graph-json"},
        "data": {"split": split or "unknown", "n_examples": int(n_examples or 1),
                 **({} if n_examples else {"note": "not recorded in the MIB graph file"})},
        "cfg": cfg,
        "nodes": nodes,
        "edges": edges,
    }


MAX_ABS_SCORE = 1e150  # sums and squares of the scores stay finite; a larger score is not a measurement


def _checked_score(value, where: str, source: str):
    """A finite number of sensible size (booleans and strings are left to the schema's check)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or abs(value) > MAX_ABS_SCORE:
            raise SchemaError(f"{source}: {where} is {value!r}; a score must be finite and at most "
                              f"{MAX_ABS_SCORE:g} in size")
    return value


def _dropped_mlp(graph, name: str, entry: Mapping) -> bool:
    """An MLP node or edge of an EAP-IG file for an attention-only model, carrying nothing."""
    import re

    if graph.has_mlp or not re.search(r"(^|->)m\d+($|->|<)", name):
        return False
    score = entry.get("score")
    return not entry.get("in_graph") and (score is None or score == 0)


def to_mib(doc: Mapping, d_model: int | None = None) -> dict:
    """EAP-IG's layout of a cbench edge-scores document (``cfg``, ``nodes``, ``edges`` only).

    ``cfg`` keeps EAP-IG's four keys (``d_model`` from the document or the argument); nodes keep
    ``in_graph`` (and ``score`` when the document has node scores); edges ``score`` and
    ``in_graph``. EAP-IG's ``logits`` node is always in the graph."""
    if not isinstance(doc, Mapping) or not all(k in doc for k in MIB_KEYS):
        raise UsageError("exporting to MIB needs an edge-scores document (with cfg, nodes and edges)")
    cfg_in = doc["cfg"]
    cfg = {k: cfg_in.get(k) for k in CFG_KEYS}
    if cfg["d_model"] is None:
        cfg["d_model"] = d_model
    missing = [k for k, v in cfg.items() if v is None]
    if missing:
        raise UsageError(f"the document's cfg lacks {', '.join(missing)}; MIB's cfg needs "
                         f"{', '.join(CFG_KEYS)}")
    nodes = {}
    for name, entry in doc["nodes"].items():
        out = {"in_graph": True if name == "logits" else bool(entry.get("in_graph"))}
        if entry.get("score") is not None:
            out["score"] = float(entry["score"])
        nodes[name] = out
    if "logits" not in nodes:
        nodes["logits"] = {"in_graph": True}
    edges = {name: {"score": float(e["score"]), "in_graph": bool(e.get("in_graph"))}
             for name, e in doc["edges"].items()}
    return {"cfg": cfg, "nodes": nodes, "edges": edges}


def load_scores(path: str | os.PathLike, artifact=None, **fields) -> dict:
    """An edge-scores document from ``path``: a cbench file as it is, a MIB graph file converted
    with :func:`from_mib` (which needs ``artifact``: pass ``--case``)."""
    doc = read_graph_json(path)
    if not is_mib_graph(doc):
        return doc
    if artifact is None:
        raise UsageError(f"{path} is a MIB/EAP-IG graph file without cbench's metadata; pass --case "
                         "(a model artifact directory or case name) so the case and model can be filled in")
    return from_mib(doc, **model_fields(artifact), source=str(path), **fields)


def validate_mib_file(path: str | os.PathLike, graph=None, case: str | None = None, d_model: int | None = None,
                      model_kind: str | None = None):
    """``cbench validate``'s hook: a :class:`~cbench.schemas.FileReport` for a MIB graph file
    (converted with the ``--case`` model's case and kind), or None when ``path`` is not one."""
    from cbench.schemas import FileReport, check_against_graph, validate

    where = str(path)
    try:
        doc = read_graph_json(path)
    except SchemaError:
        return None  # validate_file reports an unreadable file itself
    if not is_mib_graph(doc):
        return None
    if graph is None or case is None:
        return FileReport(where, "edge-scores", error=(
            "a MIB/EAP-IG graph file (cfg, nodes, edges) without cbench's metadata; pass --case DIR (a model "
            "artifact directory with config.json and meta.json) to check it as that model's edge scores"))
    try:
        converted = from_mib(doc, graph, case, {"repo": None, "revision": None, "kind": model_kind or "siit"},
                             source=where)
    except (UsageError, SchemaError) as exc:
        return FileReport(where, "edge-scores", error=str(exc))
    violations = validate(converted, "edge-scores")
    flagged = {v.path for v in violations}
    violations += [v for v in check_against_graph(converted, graph, case=case, d_model=d_model, kind="edge-scores")
                   if v.path not in flagged]
    return FileReport(where, "edge-scores", violations)
