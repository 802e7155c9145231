"""Edge-scores, circuit and circuits-at-sizes documents checked against a model's graph: every
name exists, the cfg matches, every edge is scored, sizes respect MIB's grid.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Mapping

from cbench.errors import did_you_mean
from cbench.schemas.documents import _is_number, _safe_kind
from cbench.schemas.messages import Violation, _json_type, _short, format_path
from cbench.schemas.registry import SIZE_GRID, _kind_name

# ---------------------------------------------------------------------------- semantic checks
GRAPH_KINDS = ("edge-scores", "circuit", "circuits-at-sizes")


def check_against_graph(doc: Mapping, graph, case: str | None = None, d_model: int | None = None,
                        kind: str | None = None) -> list[Violation]:
    """Checks of an edge-scores, circuit or circuits-at-sizes document against a model's graph
    (a :class:`cbench.graph.Graph`): the cfg/graph block matches, every node and edge name
    exists, no duplicates, scores are finite, circuit sizes respect the grid. ``case`` (the
    model's case id) and ``d_model`` are compared when given. Run it on a schema-valid document;
    parts with the wrong shape are skipped, not reported twice.
    """
    if not isinstance(doc, Mapping):
        return [Violation("$", f"a cbench document is a JSON object, not {_json_type(doc)}")]
    if kind is None:
        kind = _safe_kind(doc)
    else:
        kind = _kind_name(kind)
    if kind not in GRAPH_KINDS:
        return []
    out: list[Violation] = []
    doc_case = doc.get("case")
    if case is not None and isinstance(doc_case, str) and str(doc_case) != str(case):
        out.append(Violation("$.case", f"this file is for case {doc_case!r} but the model is case {case!r}"))

    if kind == "edge-scores":
        out += _check_cfg(doc.get("cfg"), "$.cfg", graph, d_model)
        nodes = doc.get("nodes")
        if isinstance(nodes, Mapping):
            for name in nodes:
                if isinstance(name, str) and not graph.has_node(name):
                    out.append(_not_in_graph(["nodes", name], "node", name, graph.node_names, graph))
        edges = doc.get("edges")
        if isinstance(edges, Mapping):
            for name, entry in edges.items():
                if isinstance(name, str) and not graph.has_edge(name):
                    out.append(_not_in_graph(["edges", name], "edge", name, graph.edge_names, graph))
                score = entry.get("score") if isinstance(entry, Mapping) else None
                if isinstance(score, float) and not math.isfinite(score):
                    out.append(Violation(format_path(["edges", name, "score"]), f"{score!r} is not a finite number"))
            missing = [e for e in graph.edge_names if e not in edges]
            if missing:
                examples = ", ".join(repr(e) for e in missing[:3])
                out.append(Violation("$.edges", f"{len(missing)} of the graph's {graph.n_edges} edges have no score "
                                                f"(e.g. {examples}); every edge needs one"))
    elif kind == "circuit":
        shape = doc.get("graph")
        out += _check_cfg(shape, "$.graph", graph, d_model)
        head = doc.get("granularity") == "head"
        known_edges = set(graph.head_edge_names) if head else set(graph.edge_names)
        edges = doc.get("edges")
        nodes = doc.get("nodes")
        node_set = set(n for n in nodes if isinstance(n, str)) if isinstance(nodes, (list, tuple)) else None
        if isinstance(nodes, (list, tuple)):
            out += _check_names(nodes, ["nodes"], "node", graph.node_names, graph)
        if isinstance(edges, (list, tuple)):
            out += _check_names(edges, ["edges"], "edge", known_edges, graph)
            if node_set is not None:
                for i, name in enumerate(edges):
                    if isinstance(name, str) and name in known_edges:
                        src, dst = name.split("->", 1)
                        dst = dst.split("<", 1)[0]
                        for end in (src, dst):
                            if end not in node_set:
                                out.append(Violation(format_path(["edges", i]),
                                                     f"edge {name!r} uses node {end!r}, which is not in $.nodes"))
        high = doc.get("high_level")
        ops = high.get("ops") if isinstance(high, Mapping) else None
        if isinstance(ops, (list, tuple)):
            for i, op in enumerate(ops):
                comps = op.get("components") if isinstance(op, Mapping) else None
                if isinstance(comps, (list, tuple)):
                    for j, name in enumerate(comps):
                        if isinstance(name, str) and not graph.has_node(name):
                            out.append(_not_in_graph(["high_level", "ops", i, "components", j], "node", name,
                                                     graph.node_names, graph))
    elif kind == "circuits-at-sizes":
        if "cfg" in doc:
            out += _check_cfg(doc.get("cfg"), "$.cfg", graph, d_model)
        circuits = doc.get("circuits")
        if isinstance(circuits, (list, tuple)):
            for i, c in enumerate(circuits):
                if not isinstance(c, Mapping):
                    continue
                frac, edges = c.get("fraction"), c.get("edges")
                if isinstance(edges, (list, tuple)):
                    out += _check_names(edges, ["circuits", i, "edges"], "edge", graph.edge_names, graph)
                if _is_number(frac) and frac not in SIZE_GRID:
                    out.append(Violation(format_path(["circuits", i, "fraction"]),
                                         f"{_short(frac)} is not on MIB's size grid "
                                         f"({', '.join(f'{g:g}' for g in SIZE_GRID)})"))
                elif _is_number(frac) and isinstance(edges, (list, tuple)):
                    limit = math.ceil(Fraction(repr(float(frac))) * graph.n_edges)
                    if len(edges) > limit:
                        out.append(Violation(format_path(["circuits", i, "edges"]),
                                             f"{len(edges)} edges is more than a circuit of size {frac:g} may have "
                                             f"(ceil({frac:g} x {graph.n_edges} edges) = {limit})"))
    return out


def _check_cfg(cfg, where: str, graph, d_model) -> list[Violation]:
    if not isinstance(cfg, Mapping):
        return []
    out = []
    expected = {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "parallel_attn_mlp": graph.parallel_attn_mlp,
                "has_mlp": graph.has_mlp}
    if d_model is not None:
        expected["d_model"] = d_model
    for key, want in expected.items():
        if key in cfg and (cfg[key] != want or type(cfg[key]) is not type(want)):
            out.append(Violation(f"{where}.{key}", f"is {_short(cfg[key])} but the model has {key} = {_short(want)}"))
    return out


def _check_names(names, parts: list, what: str, known, graph) -> list[Violation]:
    out = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            out.append(Violation(format_path(parts + [i]), f"duplicate {what} {name!r} (also at [{seen[name]}])"))
            continue
        seen[name] = i
        if name not in known:
            out.append(_not_in_graph(parts + [i], what, name, known, graph))
    return out


_EDGE_PARTS_RE = re.compile(r"^(.*?)->(.*?)(?:<([qkv])>)?$", re.S)


def _not_in_graph(parts, what: str, name: str, known, graph) -> Violation:
    where = f"the model's graph ({graph.describe()})"
    return Violation(format_path(parts), f"{what} {_short(name)} is not in {where}" + _hint(what, name, known, graph))


def _hint(what: str, name: str, known, graph) -> str:
    """A cheap, specific suggestion (difflib over 32,491 edge names would take seconds)."""
    L, H = graph.n_layers, graph.n_heads
    nodes = f"the nodes are input, a0.h0 to a{L - 1}.h{H - 1}" + (f", m0 to m{L - 1}" if graph.has_mlp else "") + " and logits"
    if what == "node":
        found = did_you_mean(name, graph.node_names) if len(name) < 100 else ""
        return found or f" ({nodes})"
    m = _EDGE_PARTS_RE.match(name)
    if not m:
        return ""
    src, dst, qkv = m.groups()
    missing = [n for n in (src, dst) if not graph.has_node(n)]
    if missing:
        return f" ({' and '.join(_short(n) for n in missing)} {'is' if len(missing) == 1 else 'are'} not a node of it; {nodes})"
    variants = [f"{src}->{dst}"] + [f"{src}->{dst}<{q}>" for q in "qkv"]
    close = [v for v in variants if v in known and v != name]
    if close:
        return f" (did you mean: {', '.join(close)}?)"
    return f" ({src} does not feed {dst}: a node reads only what earlier layers wrote)"


