"""The literature's circuits (IOI, greater-than, docstring, induction) as circuit documents:
the committed files equal what the builder makes from the papers' classes, they validate, their
edges are the ones the papers' figures name, and ``test-circuit``/``adversarial`` run them with
``--model`` on a random-weight model of GPT-2 small's graph shape (12 layers x 12 heads, narrow)."""

from __future__ import annotations

import csv
import json
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import run_main  # noqa: E402

import cbench.schemas as validation  # noqa: E402
from cbench.graph import Graph  # noqa: E402
from cbench.graph.literature import NAMES, literature_circuit  # noqa: E402

transformers = pytest.importorskip("transformers")
from test_real_models_loading import WORDS, _tokenizer  # noqa: E402

torch.set_num_threads(1)


def test_committed_files_equal_the_builder():
    from cbench_builders.literature_circuits import CIRCUITS, circuit_document

    assert tuple(CIRCUITS) == NAMES
    for name in NAMES:
        assert literature_circuit(f"literature:{name}") == circuit_document(name), name


@pytest.mark.parametrize("name", NAMES)
def test_each_validates_and_names_edges_of_its_models_graph(name):
    doc = literature_circuit(name)
    assert validation.validate(doc, "circuit") == []
    g = doc["graph"]
    graph = Graph(g["n_layers"], g["n_heads"], has_mlp=g["has_mlp"])
    assert set(doc["edges"]) <= set(graph.edge_names)
    ends = {n for e in doc["edges"] for n in (graph.edge(e).src, graph.edge(e).dst)}
    assert ends == set(doc["nodes"])
    assert set(doc["node_classes"]) <= set(doc["nodes"])
    assert doc["source"]["url"].startswith("https://")


def test_the_circuits_edges_are_the_papers():
    ioi = literature_circuit("ioi")
    heads = [n for n in ioi["nodes"] if n.startswith("a")]
    assert len(heads) == 26 and len(ioi["nodes"]) == 40  # 26 heads, 12 MLPs, input, logits
    edges = set(ioi["edges"])
    # S-inhibition heads move into the name movers' queries only; name movers read names on k and v
    assert "a7.h3->a9.h9<q>" in edges and "a7.h3->a9.h9<k>" not in edges and "a7.h3->a9.h9<v>" not in edges
    assert {"input->a9.h9<k>", "input->a9.h9<v>"} <= edges and "input->a9.h9<q>" not in edges
    assert {"a5.h5->a7.h3<k>", "a0.h1->a8.h6<v>", "a2.h2->a5.h5<k>", "a10.h7->logits"} <= edges
    assert "a7.h3->logits" not in edges and "a2.h2->a5.h5<q>" not in edges
    assert {"m3->a9.h9<q>", "a9.h9->m9", "a9.h9->m11", "m0->m11", "input->m4"} <= edges
    assert ioi["node_classes"]["a10.h7"] == "negative-name-mover"
    gt = set(literature_circuit("greater-than")["edges"])
    assert {"a0.h1->m0", "a0.h1->m3", "m3->a5.h5<k>", "a9.h1->m9", "a9.h1->logits", "m8->m11", "m4->a9.h1<q>"} <= gt
    assert "m4->a9.h1<k>" not in gt and "a9.h1->m8" not in gt
    doc = literature_circuit("docstring")
    assert len(doc["edges"]) == 37 - 13  # ACDC's list less its internal q/k/v -> head edges
    assert {"a3.h0->logits", "a3.h6->logits", "a1.h4->a3.h0<q>", "a2.h0->a3.h6<k>"} <= set(doc["edges"])
    assert set(literature_circuit("induction")["edges"]) == {"input->logits", "input->a0.h0<v>", "input->a1.h6<q>",
                                                             "input->a1.h6<v>", "a0.h0->a1.h6<k>", "a1.h6->logits"}


@pytest.fixture(scope="module")
def gpt2_shape(tmp_path_factory):
    """A random-weight checkpoint with GPT-2 small's graph (12 x 12 heads, 24 wide) and IOI-like pairs."""
    root = tmp_path_factory.mktemp("gpt2-shape")
    tok = _tokenizer()
    cfg = transformers.GPT2Config(n_embd=24, n_layer=12, n_head=12, n_positions=32, n_ctx=32, vocab_size=320)
    torch.manual_seed(3)
    transformers.AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(root / "gpt2")
    tok.save_pretrained(root / "gpt2")
    mary, john = tok(" Mary")["input_ids"][0], tok(" John")["input_ids"][0]
    r = random.Random(4)
    pairs = root / "pairs.csv"
    with open(pairs, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        n = 0
        while n < 6:
            words = " ".join(r.choice(WORDS[:12]) for _ in range(4))
            clean, corrupted = f"When Mary and John {words} gave a book to", f"When Mary and Mary {words} gave a book to"
            if len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"]):
                w.writerow([clean, corrupted, mary, john])
                n += 1
    return root / "gpt2", pairs


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_test_circuit_and_adversarial_run_a_literature_circuit_with_a_model(gpt2_shape, tmp_path):
    model, pairs = gpt2_shape
    out = tmp_path / "tests.json"
    r = run_main(["test-circuit", "--model", str(model), "--data", str(pairs), "literature:ioi", "--test",
                  "equivalence", "--test", "sufficiency", "--n-random", "5", "--out", str(out)])
    assert r.code in (0, 1), (r.stdout + r.stderr)  # 1: a test failed (random weights), which is an answer
    doc = json.loads(out.read_text())
    assert validation.validate(doc, "results") == []
    assert doc["inputs"]["circuit"] == {"path": "literature:ioi"}
    assert set(doc["results"]["tests"]) == {"equivalence", "sufficiency"}
    assert doc["results"]["tests"]["sufficiency"]["sizes"]["circuit_edges"] == len(literature_circuit("ioi")["edges"])
    out2 = tmp_path / "adv.json"
    r = run_main(["adversarial", "--model", str(model), "--data", str(pairs), "literature:greater-than", "--k", "1",
                  "--out", str(out2)])
    assert r.code == 0, (r.stdout + r.stderr)
    adv = json.loads(out2.read_text())
    assert adv["inputs"]["circuit"] == {"path": "literature:greater-than"} and adv["results"]["summary"]["raw"]["count"] > 0


def test_a_literature_circuit_on_the_wrong_model_or_name_is_one_line(gpt2_shape, tmp_path):
    model, pairs = gpt2_shape
    r = run_main(["test-circuit", "--model", str(model), "--data", str(pairs), "literature:docstring", "--test",
                  "equivalence"])
    assert r.code == 2 and "literature-docstring is a circuit of attn-only-4l (4 layers x 8 heads" in (r.stdout + r.stderr)
    assert "Traceback" not in (r.stdout + r.stderr)
    r = run_main(["adversarial", "--model", str(model), "--data", str(pairs), "literature:iot"])
    assert r.code == 2 and "no literature circuit 'iot'; there are: literature:ioi" in (r.stdout + r.stderr)
