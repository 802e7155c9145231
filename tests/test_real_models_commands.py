"""``--model``/``--data`` on ``evaluate``, ``test-circuit``, ``adversarial``, ``ablate`` and
``bench``: a random-weight checkpoint (Llama-3.1 and Gemma-2 architectures, tests/
test_real_models_loading.py's configs and locally trained tokenizer), offline; each command's
figures equal the same computation through the Python API on the resolved model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import assert_one_clean_error, run_main  # noqa: E402

transformers = pytest.importorskip("transformers")

from test_real_models_loading import _configs, _tokenizer, write_ioi_pairs  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-cmds")
    tok = _tokenizer()
    dirs = {}
    for i, family in enumerate(("llama3.1", "gemma2")):
        torch.manual_seed(10 + i)
        transformers.AutoModelForCausalLM.from_config(_configs()[family]).eval().save_pretrained(root / family)
        tok.save_pretrained(root / family)
        dirs[family] = root / family
    pairs = write_ioi_pairs(tok, root / "pairs.csv", 6, seed=2, n_words=5)
    circuit = root / "circuit.json"
    circuit.write_text(json.dumps(["input->a0.h0<q>", "input->a0.h0<k>", "input->a0.h0<v>", "a0.h0->a1.h1<v>",
                                   "a1.h1->logits", "input->logits", "m0->logits"]))
    return dirs, pairs, circuit


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _model_args(setup, family="llama3.1"):
    dirs, pairs, _ = setup
    return ["--model", str(dirs[family]), "--data", str(pairs)]


@pytest.mark.parametrize("family", ["llama3.1", "gemma2"])
def test_test_circuit_and_adversarial_take_a_model(setup, family, tmp_path):
    from cbench.api.real_models import resolve_model
    from cbench.scoring import hypothesis_tests as H
    from cbench.scoring.adversarial import adversarial_evaluation
    from cbench.scoring.task import circuit_mask

    dirs, pairs, circuit = setup
    out = tmp_path / "tests.json"
    r = run_main(["test-circuit", *_model_args(setup, family), str(circuit), "--test", "equivalence", "--test",
                  "sufficiency", "--n-random", "5", "--out", str(out)])
    assert r.exception is None and r.code in (0, 1), r.stderr  # 1: a test failed (the command's answer)
    doc = json.loads(out.read_text())
    assert doc["kind"] == "hypothesis-test" and doc["case"] == family
    rm = resolve_model(dirs[family], pairs)
    sc, data = rm.scoring_inputs()
    edges = json.loads(circuit.read_text())
    want = H._FUNCS["equivalence"](sc, data, edges, epsilon=0.1, alpha=0.05, ablation="resample",
                                   metric="logit_diff")
    assert doc["results"]["tests"]["equivalence"]["statistic"] == pytest.approx(want.statistic, rel=1e-6, abs=1e-9)
    out = tmp_path / "adv.json"
    r = run_main(["adversarial", *_model_args(setup, family), str(circuit), "--out", str(out), "--k", "2"])
    assert r.exception is None and r.code == 0, r.stderr
    adv = json.loads(out.read_text())
    want = adversarial_evaluation(sc, data, circuit_mask(rm.graph, edges), k_worst=2)
    assert adv["results"]["summary"]["raw"]["max"] == pytest.approx(want.summary["raw"]["max"], rel=1e-5)
    assert adv["results"]["summary"]["raw"]["count"] == 36  # 6 bases x 6 sources


def test_ablate_takes_a_model(setup):
    from cbench.api.real_models import resolve_model
    from cbench.scoring.ablation import ablate

    dirs, pairs, _ = setup
    r = run_main(["ablate", *_model_args(setup), "--nodes", "a0.h1,m1", "--json"])
    assert r.exception is None and r.code == 0, r.stderr
    got = json.loads(r.stdout)
    rm = resolve_model(dirs["llama3.1"], pairs)
    want = ablate(rm.runtime, rm.data, ["a0.h1", "m1"], [], "resample", None, False)
    assert got["metric_value"] == pytest.approx(want.metric_value, rel=1e-6)
    assert got["metric_value"] > 0


def test_evaluate_and_bench_take_a_model(setup, tmp_path):
    scores = tmp_path / "eap.json"
    r = run_main(["discover", *_model_args(setup), "-m", "eap", "--out", str(scores), "-q"])
    assert r.code == 0, r.stderr
    r = run_main(["evaluate", str(scores), *_model_args(setup)])
    assert r.exception is None and r.code == 0, r.stderr
    assert "CPR:" in r.stdout + r.stderr and "CMD:" in r.stdout + r.stderr
    out = tmp_path / "bench"
    r = run_main(["bench", *_model_args(setup), "--methods", "eap,random", "--out", str(out)])
    assert r.exception is None and r.code == 0, r.stderr
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]["faithfulness"]
    assert set(rows) == {"eap", "random"} and all(np.isfinite(v["cpr"]) for v in rows.values())
    assert (out / "scores" / "eap.json").is_file() and "| eap |" in (out / "table.md").read_text()


def test_model_arguments_are_checked_in_one_line(setup, tmp_path):
    dirs, pairs, circuit = setup
    for args, words in ((["test-circuit", "case-3", str(circuit), "--model", str(dirs["llama3.1"]), "--test", "all"],
                         "only the CIRCUIT"),
                        (["adversarial", "case-3", str(circuit), "--data", str(pairs)], "go with --model"),
                        (["ablate", "--nodes", "a0.h0"], "one of them"),
                        (["test-circuit", "--model", str(dirs["llama3.1"]), str(circuit), "--test", "all"],
                         "needs its pairs"),
                        (["bench", "--model", str(dirs["llama3.1"]), "--data", str(pairs), "--methods", "eapp",
                          "--out", str(tmp_path / "b")], "unknown method")):
        r = run_main(args)
        assert_one_clean_error(r, 2, words)
