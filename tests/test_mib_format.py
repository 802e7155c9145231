"""MIB / EAP-IG graph files (``Graph.to_json``'s layout) in validate, score, evaluate and export.

The fixture is written here in EAP-IG's layout: ``{"cfg": {n_layers, n_heads, parallel_attn_mlp,
d_model}, "nodes": {name: {"in_graph"}}, "edges": {name: {"score", "in_graph"}}}``, nodes in
EAP-IG's order (input, per layer the heads then the MLP, logits), ``logits`` always in the graph.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cbench.artifacts.model import read_model_artifact
from cbench.artifacts.mib_format import from_mib, is_mib_graph, model_fields, read_graph_json, to_mib
from hub_helpers import assert_clean_error, run_cli

CASE = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench" / "case-3" / "v1.0.0"


def eap_ig_layout(art, node_scores: bool = False) -> dict:
    """What EAP-IG's Graph.to_json writes for this model, with the ground truth scored highest."""
    g = art.graph
    truth = set(art.circuit["edges"])
    nodes = {}
    for n in g.nodes:
        nodes[n.name] = {"in_graph": n.name == "logits" or n.name in {"input", *art.circuit["nodes"]}}
        if node_scores:
            nodes[n.name]["score"] = float("nan") if n.name == "logits" else 0.5
    edges = {e.name: {"score": (1.0 if e.name in truth else 0.01 * (i % 7)), "in_graph": e.name in truth}
             for i, e in enumerate(g.edges)}
    return {"cfg": {"n_layers": art.config["n_layers"], "n_heads": art.config["n_heads"],
                    "parallel_attn_mlp": False, "d_model": art.config["d_model"]},
            "nodes": nodes, "edges": edges}


@pytest.fixture(scope="module")
def art():
    return read_model_artifact(CASE)


@pytest.fixture
def mib_file(tmp_path, art):
    p = tmp_path / "eap_ig_graph.json"
    p.write_text(json.dumps(eap_ig_layout(art)))
    return p


def test_round_trip_keeps_eap_igs_layout(art):
    doc = eap_ig_layout(art)
    assert is_mib_graph(doc)
    cb = from_mib(doc, **model_fields(art))
    assert cb["schema"] == "cbench/edge-scores/v1" and cb["case"] == "3" and cb["model"]["kind"] == "siit"
    assert cb["method"]["name"] == "unknown" and cb["data"]["split"] == "unknown"
    from cbench.schemas import check_against_graph, validate

    assert validate(cb) == [] and check_against_graph(cb, art.graph, case="3", d_model=art.config["d_model"]) == []
    back = to_mib(cb)
    assert back == doc and list(back) == ["cfg", "nodes", "edges"] and list(back["cfg"]) == list(doc["cfg"])


def test_nan_node_scores_as_eap_ig_writes_them(tmp_path, art):
    p = tmp_path / "g.json"
    p.write_text(json.dumps(eap_ig_layout(art, node_scores=True)))  # json.dumps writes NaN
    assert "NaN" in p.read_text()
    doc = read_graph_json(p)
    assert doc["nodes"]["logits"]["score"] is None and doc["nodes"]["input"]["score"] == 0.5
    cb = from_mib(doc, **model_fields(art))
    assert "score" not in cb["nodes"]["logits"] and cb["nodes"]["input"]["score"] == 0.5


def test_validate_needs_case_then_accepts(mib_file):
    proc = run_cli(["validate", str(mib_file)])
    assert proc.returncode == 1 and "--case" in proc.stdout and "Traceback" not in proc.stderr
    proc = run_cli(["validate", "--case", str(CASE), str(mib_file)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK (edge-scores)" in proc.stdout


def test_validate_reports_a_bad_edge_in_a_mib_file(tmp_path, art):
    doc = eap_ig_layout(art)
    doc["edges"]["a1.h0->m7"] = {"score": 0.0, "in_graph": False}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    proc = run_cli(["validate", "--case", str(CASE), str(p)])
    assert proc.returncode == 1 and "a1.h0->m7" in proc.stdout


@pytest.mark.slow  # > 20 s: `make test-slow`
def test_score_and_evaluate_take_a_mib_file(mib_file):
    proc = run_cli(["score", str(CASE), str(mib_file)])
    assert proc.returncode == 0, proc.stderr
    assert "edge AUROC: 1" in proc.stdout  # the fixture ranks the ground truth first
    proc = run_cli(["evaluate", str(mib_file)])
    assert_clean_error(proc, "--case")
    proc = run_cli(["evaluate", str(mib_file), "--case", str(CASE), "--sampled", "--n-examples", "8"],
                   env={"CBENCH_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "edge AUROC: 1" in proc.stdout and "CPR:" in proc.stdout


def test_export_writes_eap_igs_layout(tmp_path, art):
    doc = eap_ig_layout(art)
    cb = tmp_path / "scores.json"
    cb.write_text(json.dumps(from_mib(doc, **model_fields(art), method="my-method")))
    out = tmp_path / "mib.json"
    proc = run_cli(["export", str(cb), "--format", "mib", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == doc
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert_clean_error(run_cli(["export", str(bad), "--out", str(tmp_path / "x.json")]))
    assert not (tmp_path / "x.json").exists()
