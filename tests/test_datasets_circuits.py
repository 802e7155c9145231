"""The circuits dataset's rows from circuit documents (hand-built, so the expected rows are known)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from cbench.errors import ArtifactError, BuildError
from cbench.graph.graph import Graph
from cbench_builders.datasets import circuits as circuits_dataset

TRACR = {
    "schema": "cbench/circuit/v1", "case": "3", "model_kind": "tracr", "granularity": "qkv",
    "graph": {"n_layers": 2, "n_heads": 1, "has_mlp": True, "parallel_attn_mlp": False},
    "nodes": ["input", "m0", "a1.h0", "logits"],
    "edges": ["input->m0", "m0->a1.h0<v>", "a1.h0->logits"],
}
SIIT = {
    "schema": "cbench/circuit/v1", "case": "3", "model_kind": "siit", "granularity": "qkv",
    "graph": {"n_layers": 2, "n_heads": 4, "has_mlp": True, "parallel_attn_mlp": False},
    "nodes": ["input", "m0", "a1.h2", "logits"],
    "edges": ["input->m0", "m0->a1.h2<v>", "a1.h2->logits"],
}


def test_rows_cover_the_full_graph_and_mark_the_circuit():
    rows = circuits_dataset.circuit_rows(TRACR)
    g = Graph(2, 1)
    assert [r["edge"] for r in rows] == list(g.edge_names)
    assert {r["edge"] for r in rows if r["in_circuit"]} == set(TRACR["edges"])
    assert all(r["in_circuit_siit"] is None and r["granularity"] == "qkv" for r in rows)
    v = next(r for r in rows if r["edge"] == "m0->a1.h0<v>")
    assert (v["src"], v["dst"], v["qkv"]) == ("m0", "a1.h0", "v")
    assert next(r for r in rows if r["edge"] == "a1.h0->logits")["qkv"] is None


def test_siit_rows_are_the_union_of_both_graphs():
    rows = circuits_dataset.circuit_rows(TRACR, SIIT)
    t, s = Graph(2, 1), Graph(2, 4)
    names = [r["edge"] for r in rows]
    assert len(names) == len(set(names)) == len(set(t.edge_names) | set(s.edge_names))
    assert names[:t.n_edges] == list(t.edge_names)
    assert {r["edge"] for r in rows if r["in_circuit_siit"]} == set(SIIT["edges"])
    assert {r["edge"] for r in rows if r["in_circuit"]} == set(TRACR["edges"])
    # an edge only the SIIT graph has: in_circuit is null there
    only_siit = next(r for r in rows if r["edge"] == "m0->a1.h2<v>")
    assert only_siit["in_circuit"] is None and only_siit["in_circuit_siit"] is True


def test_build_from_a_tracr_dir_and_refusals(tmp_path):
    art = tmp_path / "tracr" / "tracr-case-3"
    art.mkdir(parents=True)
    (art / "circuit.json").write_text(json.dumps(TRACR))
    b = circuits_dataset.build_circuits_case("3", tmp_path / "tracr", tmp_path / "out", siit_dir=tmp_path / "none")
    table = pq.read_table(b.path)
    assert table.num_rows == Graph(2, 1).n_edges and b.n_tracr_circuit == 3
    assert sorted(e for e, c in zip(table["edge"].to_pylist(), table["in_circuit"].to_pylist()) if c) == \
        sorted(TRACR["edges"])
    bad = dict(TRACR, edges=["input->a7.h0<q>"])
    (art / "circuit.json").write_text(json.dumps(bad))
    with pytest.raises((ArtifactError, BuildError)):
        circuits_dataset.build_circuits_case("3", tmp_path / "tracr", tmp_path / "out")
    with pytest.raises(BuildError, match="no compiled Tracr model"):
        circuits_dataset.build_circuits_case("33", tmp_path / "tracr", tmp_path / "out")


def test_unreleased_siit_models_do_not_count(tmp_path):
    art = tmp_path / "siit" / "case-3"
    art.mkdir(parents=True)
    (art / "circuit.json").write_text(json.dumps(SIIT))
    (art / "meta.json").write_text(json.dumps({"released": False}))
    assert circuits_dataset.siit_circuit_path(tmp_path / "siit", "3") is None
    (art / "meta.json").write_text(json.dumps({"released": True}))
    assert circuits_dataset.siit_circuit_path(tmp_path / "siit", "3") == art / "circuit.json"


def test_siit_signal_carries_the_edge_marks():
    """A SIIT ground-truth edge marked "signal": false in circuit.json is false in siit_signal, every
    other SIIT ground-truth edge true, any other row null."""
    siit = {**SIIT, "edges": SIIT["edges"] + ["input->a1.h2<k>"],
            "edge_signal": {"input->a1.h2<k>": {"signal": False, "why": "position only"}}}
    rows = {r["edge"]: r for r in circuits_dataset.circuit_rows(TRACR, siit)}
    assert rows["input->a1.h2<k>"]["siit_signal"] is False and rows["input->a1.h2<k>"]["in_circuit_siit"] is True
    assert all(rows[e]["siit_signal"] is True for e in SIIT["edges"])
    assert all(r["siit_signal"] is None for e, r in rows.items() if e not in siit["edges"])
    assert all(r["siit_signal"] is None for r in circuits_dataset.circuit_rows(TRACR))
