"""`cbench discover` and `cbench ablate` end to end on an artifact directory, and their bad-input
messages (one line, non-zero exit)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from circuit_models import HANDBUILT_CIRCUIT, handbuilt_model

from cbench import schemas as validation
from cbench.cli import cli, main
from cbench.graph.graph import Graph

META = {
    "schema": "cbench/model-meta/v1", "case": "hand-1", "model_kind": "tracr", "task_type": "categorical",
    "description": "previous token, averaged (hand-built)", "input_tokens": ["BOS", "a", "b", "c"],
    "bos_token": "BOS", "pad_token": None, "output_classes": ["BOS", "a", "b", "c"], "min_seq_len": 5,
    "max_seq_len": 5, "causal": True, "seed": 0, "training": None, "metrics": None, "dataset_revision": None,
    "training_time_s": 0.0, "hardware": "cpu", "cbench_version": "0.1.0", "files": {},
}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from cbench.artifacts.model import write_model_artifact

    model = handbuilt_model(with_mlp=False)
    g = Graph.from_config(model.cfg)
    circuit = {"schema": "cbench/circuit/v1", "case": "hand-1", "model_kind": "tracr", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": False, "parallel_attn_mlp": False},
               "nodes": sorted(g.nodes_of(HANDBUILT_CIRCUIT)), "edges": sorted(HANDBUILT_CIRCUIT)}
    path = tmp_path_factory.mktemp("art") / "hand-1"
    write_model_artifact(path, model, META, circuit=circuit)
    return path


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_discover_writes_a_valid_file(artifact, tmp_path):
    from click.testing import CliRunner

    out = tmp_path / "scores.json"
    r = CliRunner().invoke(cli, ["discover", str(artifact), "--method", "acdc", "-p", "threshold=0.001",
                                 "-p", "ablation=zero", "--sampled", "--n-examples", "30", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    validation.check(doc, "edge-scores")
    g = Graph(2, 2, has_mlp=False)
    assert validation.check_against_graph(doc, g, case="hand-1") == []
    assert {e for e, v in doc["edges"].items() if v["in_graph"]} == HANDBUILT_CIRCUIT
    assert doc["data"]["n_examples"] == 30 and doc["data"]["split"] == "sampled"
    assert doc["method"]["hyperparameters"]["threshold"] == 0.001
    assert doc["model"] == {"repo": None, "revision": None, "kind": "tracr"}
    r = CliRunner().invoke(cli, ["validate", str(out), "--case", str(artifact)])
    assert r.exit_code == 0 and "OK (edge-scores)" in r.output, r.output


def test_discover_summary_and_ablate(artifact):
    from click.testing import CliRunner

    r = CliRunner().invoke(cli, ["discover", str(artifact), "-m", "eap-ig-inputs", "--sampled", "-q",
                                 "--n-examples", "20", "-p", "ablation=zero"])
    assert r.exit_code == 0, r.output
    assert "eap-ig-inputs on hand-1 (ce, 20 examples" in r.output
    r = CliRunner().invoke(cli, ["ablate", str(artifact), "--edges", ",".join(sorted(HANDBUILT_CIRCUIT)),
                                 "--complement", "--kind", "zero", "--sampled", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["accuracy"] == 1.0 and res["metric"] == "kl" and res["metric_value"] < 1e-6
    r = CliRunner().invoke(cli, ["ablate", str(artifact), "--node-effects", "--sampled", "--n-examples", "10"])
    assert r.exit_code == 0, r.output
    assert "a1.h1" in r.output and "resample" in r.output


@pytest.mark.parametrize("args,message", [
    (["discover", "case-424242", "-m", "acdc"], "case 'case-424242' is not pulled; run `cbench pull case-424242` first"),
    (["discover", "case-3", "-m", "acdcc"], "unknown method 'acdcc' (did you mean: acdc?); methods: acdc, eap"),
    (["discover", "case-3", "-m", "acdc", "-p", "threshold=-2"], "acdc: threshold must be >= 0.0"),
    (["discover", "case-3", "-m", "eap-ig-inputs", "-p", "steps"], "--param takes key=value"),
    (["ablate", "case-424242", "--nodes", "a0.h0"], "is not pulled; run `cbench pull case-424242` first"),
])
def test_bad_input_is_one_line(args, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "cb"))
    code, out, err = run_cli(args, capsys)
    assert code != 0
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_names_on_an_artifact(artifact, capsys):
    code, _out, err = run_cli(["ablate", str(artifact), "--nodes", "a5.h0", "--sampled"], capsys)
    assert code == 1 and "node 'a5.h0' is not in this model's graph" in err
    code, _out, err = run_cli(["ablate", str(artifact), "--edges", "input->a0.h0", "--sampled", "--metric", "l2"], capsys)
    assert code == 2 and "metric 'l2' needs a numerical task" in err
    code, _out, err = run_cli(["discover", str(artifact), "-m", "eap", "--metric", "mae", "--sampled"], capsys)
    assert code == 2 and "metric 'mae' needs a numerical task" in err
