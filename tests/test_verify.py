"""`cbench verify` and the release gates (cbench.verify.gates) on released models: a Tracr model's
ground truth passes the edge gates, a ground truth that misses a used edge fails them, the v1 SIIT
model of case 3 fails the edge gates (the zoo v2 issue's finding), and the CLI answers with one
PASS/FAIL line per gate and exit 1 on failure."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from cbench.artifacts.model import read_model_artifact
from cbench.tasks.data import sample_pairs
from cbench.verify.gates import verify_model

ZOO = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"


@pytest.fixture(scope="module")
def tracr3():
    art = read_model_artifact(ZOO / "tracr-case-3" / "v1.0.0")
    return art, art.load_model()


def _fresh(meta, n=200, seed=7):
    return {"fresh": sample_pairs(meta, n, seed=seed)}


def test_tracr_ground_truth_passes_the_edge_gates(tracr3):
    art, model = tracr3
    torch.set_num_threads(1)
    report = verify_model(model, art.meta, art.circuit, None, model, _fresh(art.meta))
    gates = {g.name: g for g in report.gates}
    assert report.passed, report.format()
    assert gates["complement_edge_effect"].value == 0.0  # a compiled model uses exactly its circuit
    assert gates["oracle_edge_auroc"].value == 1.0
    signal = {e.edge: e.signal for e in report.edges}
    # position-only edges carry nothing resample ablation can see: base and source share positions
    assert signal["input->a1.h0<q>"] is False and signal["input->a1.h0<k>"] is False
    assert signal["m0->a1.h0<v>"] and signal["input->m0"] and signal["a1.h0->logits"]
    why = next(e.why for e in report.edges if e.edge == "input->a1.h0<q>")
    assert "position" in why


def test_a_ground_truth_that_misses_a_used_edge_fails(tracr3):
    art, model = tracr3
    circuit = copy.deepcopy(art.circuit)
    circuit["edges"] = [e for e in circuit["edges"] if e != "m0->a1.h0<v>"]
    report = verify_model(model, art.meta, circuit, None, model, _fresh(art.meta))
    gates = {g.name: g for g in report.gates}
    assert not report.passed
    assert gates["complement_edge_effect"].value > 0.3 and not gates["complement_edge_effect"].passed


def test_v1_siit_case_3_fails_the_edge_gates_but_passes_the_node_gates():
    art = read_model_artifact(ZOO / "case-3" / "v1.0.0")
    model, tracr = art.load_model(), art.tracr.load_model()
    report = verify_model(model, art.meta, art.circuit, art.correspondence, tracr, _fresh(art.meta, 300))
    gates = {g.name: g for g in report.gates}
    for name in ("accuracy", "iia", "siia", "max_out_of_circuit_node_effect"):
        assert gates[name].passed, report.format()
    assert gates["complement_edge_effect"].value > 0.3  # the issue measured 61 %
    assert not report.passed
    summary = report.summary()
    assert summary["complement_edge_effect"]["passed"] is False and "fresh" in summary["iia"]


def test_a_mark_cannot_hide_an_edge_the_model_uses():
    """Marking an edge "signal": false leaves it out of scoring, so a mark on an edge the model
    uses must fail (marked_edges_with_signal); the release's own marks hold."""
    art = read_model_artifact(ZOO / "case-3" / "v2.0.0")
    model, tracr = art.load_model(), art.tracr.load_model()
    pairs = _fresh(art.meta, 200)
    report = verify_model(model, art.meta, art.circuit, art.correspondence, tracr, pairs)
    gates = {g.name: g for g in report.gates}
    assert gates["marked_edges_with_signal"].passed and gates["marked_edges_with_signal"].value == 0
    assert gates["marked_edges_the_program_uses"].passed  # its marks are position-only q/k the program ignores
    assert any(e.marked for e in report.edges)
    circuit = copy.deepcopy(art.circuit)
    circuit["edge_signal"] = {**circuit.get("edge_signal", {}), "m0->a1.h2<v>": {"signal": False, "why": "hidden"}}
    report = verify_model(model, art.meta, circuit, art.correspondence, tracr, pairs)
    gates = {g.name: g for g in report.gates}
    assert not gates["marked_edges_with_signal"].passed
    assert gates["marked_edges_with_signal"].detail == "m0->a1.h2<v>"
    assert "USED BY THE MODEL" in report.format()
    # ... and the Tracr program uses it too: a mark may only stand for a step the program skips
    assert not gates["marked_edges_the_program_uses"].passed
    assert gates["marked_edges_the_program_uses"].detail.startswith("m0->a1.h2<v> (")


def test_program_edge_changes_reads_the_tracr_model_through_the_correspondence():
    """The share of the Tracr model's outputs that one high-level edge moves, for the low-level edge
    it maps to: none for the position-only key the program ignores, many for the value it reads."""
    from cbench.verify.gates import _HighLevel, program_edge_changes

    art = read_model_artifact(ZOO / "case-3" / "v2.1.0")
    hl = _HighLevel(art.tracr.load_model(), "numerical", None)
    marked = sorted(e for e, v in art.circuit["edge_signal"].items() if not v["signal"])
    changes = program_edge_changes(hl, art.correspondence, marked + ["m0->a1.h2<v>"], [_fresh(art.meta, 200)["fresh"]])
    assert all(changes[e] == 0.0 for e in marked), changes
    assert changes["m0->a1.h2<v>"] > 0.2, changes


def test_a_hand_written_model_excuses_a_silent_q_or_k_only_while_its_step_carries_signal():
    """IOI's high-level edges join whole nodes: a head whose attention reads only position may
    carry the step through v, but a step with every q, k and v silent is a skipped step."""
    from cbench.verify.gates import hand_written_edges_used

    truth = {f"{s}->{d}<{x}>" for s, d in [("input", "a1.h1"), ("input", "a2.h1"), ("input", "a4.h1"),
                                             ("a1.h1", "a2.h1"), ("a2.h1", "a4.h1")] for x in "qkv"}
    truth.add("a4.h1->logits")
    silent = {"input->a1.h1<q>", "input->a1.h1<k>", "a1.h1->a2.h1<q>", "a1.h1->a2.h1<k>", "a1.h1->a2.h1<v>"}
    used = hand_written_edges_used(silent, truth)
    assert used == {"input->a1.h1<q>": 0.0, "input->a1.h1<k>": 0.0, "a1.h1->a2.h1<q>": 1.0,
                    "a1.h1->a2.h1<k>": 1.0, "a1.h1->a2.h1<v>": 1.0}
    assert hand_written_edges_used({"a4.h1->logits"}, truth) == {"a4.h1->logits": 1.0}

def test_cli_prints_each_gate_and_exits_1_on_failure(tmp_path):
    from cbench.cli import cli as main

    runner = CliRunner()
    res = runner.invoke(main, ["verify", str(ZOO / "case-3" / "v1.0.0"), "--n-pairs", "100", "--no-dataset"])
    assert res.exit_code == 1, res.output
    assert "FAIL  complement_edge_effect" in res.output and "PASS  iia" in res.output
    res = runner.invoke(main, ["verify", str(ZOO / "tracr-case-3" / "v1.0.0"), "--n-pairs", "100", "--no-dataset",
                               "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["passed"] is True and doc["model_kind"] == "tracr"
    assert {g["name"] for g in doc["gates"]} == {"complement_edge_effect", "oracle_edge_auroc"}


def test_cli_bad_input_is_one_line(tmp_path):
    from cbench.cli import cli as main

    res = CliRunner().invoke(main, ["verify", str(tmp_path / "nope")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["verify", str(ZOO / "tracr-case-3" / "v1.0.0"), "--n-pairs", "0"])
    assert res.exit_code == 2
