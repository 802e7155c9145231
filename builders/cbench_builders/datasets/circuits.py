"""The ground-truth edge labels (``cbench/circuits``): one config per case, one row per edge.

A config ``case-<id>`` has a single split ``train`` with one row per edge of the full graph of
the case's model, in canonical names (DESIGN.md, "Graph naming")::

    edge, src, dst, qkv, in_circuit, in_circuit_siit, siit_signal, granularity

``in_circuit`` is the Tracr (compiled) model's ground truth, from its ``circuit.json``;
``in_circuit_siit`` the SIIT model's (the Tracr circuit mapped through the correspondence),
null while no SIIT model exists for the case. ``siit_signal`` is false on a SIIT ground-truth
edge that ``circuit.json`` marks ``"signal": false`` (the program ignores it under resample
ablation, such as a query that reads only position; scoring leaves it out by default), true on
every other SIIT ground-truth edge, null elsewhere. The two models' graphs differ in size (the SIIT
model has at least 4 heads and 2 layers), so the rows are the union of both graphs' edges: first
every edge of the Tracr graph in its canonical order, then the SIIT graph's remaining edges in
its order. A column is null on a row whose edge is not in that model's graph, so
``ds.filter(lambda r: r["in_circuit"])`` gives exactly the Tracr circuit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cbench.errors import ArtifactError, BuildError
from cbench.graph.graph import Graph
from cbench_builders.release.parquet import write_parquet

SCHEMA = pa.schema([
    ("edge", pa.string()),
    ("src", pa.string()),
    ("dst", pa.string()),
    ("qkv", pa.string()),
    ("in_circuit", pa.bool_()),
    ("in_circuit_siit", pa.bool_()),
    ("siit_signal", pa.bool_()),
    ("granularity", pa.string()),
])


@dataclass
class CircuitsBuild:
    case: str
    path: Path
    n_edges: int
    n_tracr_circuit: int
    n_siit_circuit: int | None
    tracr_graph: dict
    siit_graph: dict | None


def _read_circuit(path: Path, case: str) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"case {case}: no circuit.json at {path}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"case {case}: cannot read {path}: {exc}") from None
    try:
        from cbench.schemas import check

        check(doc, "circuit")
    except ImportError:  # validation module not installed yet: check the fields we use
        for key in ("graph", "edges"):
            if key not in doc:
                raise ArtifactError(f"case {case}: {path} has no {key!r}")
    return doc


def _graph_of(doc: dict) -> Graph:
    g = doc["graph"]
    return Graph(int(g["n_layers"]), int(g["n_heads"]), has_mlp=bool(g.get("has_mlp", True)),
                 parallel_attn_mlp=bool(g.get("parallel_attn_mlp", False)))


def siit_circuit_path(siit_dir: Path | None, case: str) -> Path | None:
    """The released SIIT model's circuit.json for ``case`` under ``siit_dir``, if there is one
    (a model written with ``--keep-failed`` that missed a release gate does not count)."""
    if siit_dir is None:
        return None
    art = Path(siit_dir) / f"case-{case}"
    path = art / "circuit.json"
    if not path.is_file():
        return None
    meta_path = art / "meta.json"
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        if meta.get("released") is False:
            return None
    return path


def circuit_rows(tracr: dict, siit: dict | None = None) -> list[dict]:
    """Rows for one case from its Tracr circuit document (and the SIIT one, if any)."""
    g_t = _graph_of(tracr)
    t_edges = set(tracr["edges"])
    bad = sorted(e for e in t_edges if not g_t.has_edge(e))
    if bad:
        raise ArtifactError(f"case {tracr.get('case')}: circuit.json names edges not in its graph: {bad[:5]}")
    gran = tracr.get("granularity", "qkv")
    g_s = _graph_of(siit) if siit is not None else None
    s_edges = set(siit["edges"]) if siit is not None else set()
    silent = {e for e, v in ((siit or {}).get("edge_signal") or {}).items() if not v.get("signal", True)}

    def signal(name: str):
        return (name not in silent) if name in s_edges else None
    if g_s is not None:
        bad = sorted(e for e in s_edges if not g_s.has_edge(e))
        if bad:
            raise ArtifactError(f"case {tracr.get('case')}: the SIIT circuit names edges not in its graph: {bad[:5]}")
    rows = []
    for e in g_t.edges:
        rows.append({"edge": e.name, "src": e.src, "dst": e.dst, "qkv": e.qkv,
                     "in_circuit": e.name in t_edges,
                     "in_circuit_siit": (e.name in s_edges if g_s is not None and g_s.has_edge(e.name) else None),
                     "siit_signal": signal(e.name), "granularity": gran})
    if g_s is not None:
        for e in g_s.edges:
            if g_t.has_edge(e.name):
                continue
            rows.append({"edge": e.name, "src": e.src, "dst": e.dst, "qkv": e.qkv, "in_circuit": None,
                         "in_circuit_siit": e.name in s_edges, "siit_signal": signal(e.name),
                         "granularity": gran})
    return rows


def data_file(case: str) -> str:
    return f"case-{case}/train-00000-of-00001.parquet"


def build_circuits_case(case: str, tracr_dir: Path, out_dir: Path, siit_dir: Path | None = None) -> CircuitsBuild:
    """Write ``<out_dir>/case-<id>/train-00000-of-00001.parquet`` for one case."""
    tracr_path = Path(tracr_dir) / f"tracr-case-{case}" / "circuit.json"
    if not tracr_path.is_file():
        raise BuildError(f"case {case}: no compiled Tracr model at {tracr_path.parent}; "
                         f"run `cbench build tracr --cases {case}` first")
    tracr = _read_circuit(tracr_path, case)
    spath = siit_circuit_path(siit_dir, case)
    siit = _read_circuit(spath, case) if spath is not None else None
    rows = circuit_rows(tracr, siit)
    meta = {
        "format": "cbench/circuits/v1", "case": str(case),
        "tracr_graph": _graph_of(tracr).cfg, "siit_graph": _graph_of(siit).cfg if siit else None,
        "tracr_circuit_edges": len(tracr["edges"]),
        "siit_circuit_edges": len(siit["edges"]) if siit else None,
    }
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata(
        {"cbench": json.dumps(meta, sort_keys=True)})
    path = write_parquet(table, Path(out_dir) / data_file(case))
    return CircuitsBuild(str(case), path, len(rows), len(tracr["edges"]),
                         len(siit["edges"]) if siit else None, meta["tracr_graph"], meta["siit_graph"])
