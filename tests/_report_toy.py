"""Toy bench results for the executor and report tests: two small model artifacts (cases toy3
and toy4, the scoring toy model with two seeds) and a helper that runs `cbench bench` on them."""

from __future__ import annotations

import json
from pathlib import Path

import _scoring_toy as T
from cbench.graph.graph import Graph

METHODS = "eap,acdc,random"


def write_case(path: Path, case: str, seed: int):
    from cbench.artifacts.model import write_model_artifact

    model = T.toy_model(seed)
    graph = Graph.from_config(model.cfg)
    edges = T.toy_circuit_edges(graph)
    circuit = {"schema": "cbench/circuit/v1", "case": case, "model_kind": "tracr", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": True, "parallel_attn_mlp": False},
               "nodes": sorted(graph.nodes_of(edges)), "edges": edges}
    return write_model_artifact(path, model, dict(T.FULL_META, case=case), circuit=circuit)


def write_cases(root: Path) -> str:
    """The two toy artifacts under ``root``; the --cases argument naming them."""
    write_case(root / "toy3", "toy3", 0)
    write_case(root / "toy4", "toy4", 1)
    return f"{root / 'toy3'},{root / 'toy4'}"


def bench_args(cases: str, out: Path, methods: str = METHODS) -> list[str]:
    return ["bench", "--cases", cases, "--methods", methods, "--out", str(out), "--sampled", "--n-examples", "16"]


def normalized(path: Path) -> bytes:
    """A result file's bytes with the run's clock readings blanked: the scores' ``created`` and
    ``runtime_s``, results.json's timings and creation time, table.md's wall-time and runtime lines."""
    if path.suffix == ".json":
        doc = json.loads(path.read_bytes())
        for key in ("created", "runtime_s"):
            doc.pop(key, None)
        for key in ("wall_time_s", "method_runtime_s"):
            doc.get("results", {}).pop(key, None)
        return json.dumps(doc, sort_keys=True).encode()
    if path.name == "table.md":
        text = path.read_text()
        text = text.split("Method runtime per case")[0]  # timings, then the wall time: the last sections
        return text.encode()
    return path.read_bytes()


def tree(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
