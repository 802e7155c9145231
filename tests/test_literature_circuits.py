"""The literature's circuits (IOI, greater-than, docstring, induction) as circuit documents:
the committed files equal what the builder makes from the papers' classes, they validate, their
edges are the ones the papers' figures name, and ``test-circuit``/``adversarial`` run them with
``--model`` on a random-weight model of GPT-2 small's graph shape (12 layers x 12 heads, narrow)."""

from __future__ import annotations

import json
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
from test_real_models_loading import _tokenizer, write_ioi_pairs  # noqa: E402

torch.set_num_threads(1)


def test_committed_files_equal_the_builder():
    from cbench_builders.literature.circuits import CIRCUITS, circuit_document

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
    return root / "gpt2", write_ioi_pairs(tok, root / "pairs.csv", 6, seed=4, n_words=4)


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


def _transformer_lens_checkpoint(d: Path, n_layers: int, n_heads: int, seed: int) -> None:
    """A random-weight checkpoint in TransformerLens's training layout (as Neel Nanda's toy models
    are published): config.json, model_final.pth, and the tokenizer trained here."""
    from cbench.artifacts.transformer_lens_adapter import build_model, model_state_dict

    cfg = dict(d_model=32, d_head=4, n_heads=n_heads, n_layers=n_layers, n_ctx=32, d_vocab=320, act_fn="gelu",
               attn_only=True, normalization_type="LN", positional_embedding_type="shortformer", seed=seed)
    d.mkdir(parents=True)
    torch.save(model_state_dict(build_model(cfg)), d / "model_final.pth")
    (d / "config.json").write_text(json.dumps({
        "d_model": 32, "d_head": 4, "n_heads": n_heads, "n_layers": n_layers, "n_ctx": 32, "d_vocab": 320,
        "act_fn": "gelu", "attn_only": True, "normalization": "LN", "shortformer_pos": True, "d_mlp": 128}))
    _tokenizer().save_pretrained(d)


@pytest.fixture(scope="module")
def attention_only(tmp_path_factory, gpt2_shape):
    """attn-only-4l's shape in the Hugging Face cache under its repository name, and a 2-layer
    8-head directory (Redwood's model's shape), both shortformer and attention only."""
    root = tmp_path_factory.mktemp("attn-only")
    cache = root / "hub"
    snap = cache / "models--NeelNanda--Attn_Only_4L512W_C4_Code" / "snapshots" / ("0" * 40)
    _transformer_lens_checkpoint(snap, 4, 8, seed=5)
    (cache / "models--NeelNanda--Attn_Only_4L512W_C4_Code" / "refs").mkdir()
    (cache / "models--NeelNanda--Attn_Only_4L512W_C4_Code" / "refs" / "main").write_text("0" * 40)
    _transformer_lens_checkpoint(root / "attn-2l", 2, 8, seed=6)
    return cache, root / "attn-2l", gpt2_shape[1]


def test_docstring_and_induction_run_on_attention_only_shortformer_models(attention_only, tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache, two_layer, pairs = attention_only
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    out = tmp_path / "docstring.json"
    r = run_main(["test-circuit", "--model", "attn-only-4l", "--data", str(pairs), "literature:docstring",
                  "--test", "sufficiency", "--n-random", "5", "--out", str(out)])
    assert r.code in (0, 1), r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert doc["results"]["tests"]["sufficiency"]["sizes"]["circuit_edges"] == 24
    r = run_main(["adversarial", "--model", str(two_layer), "--data", str(pairs), "literature:induction", "--k", "1",
                  "--json"])
    assert r.code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["results"]["summary"]["raw"]["count"] > 0
    # the model as loaded is the checkpoint: the runtime's unpatched pass equals TransformerLens on it
    from cbench.api.real_models import resolve_model

    rm = resolve_model(str(two_layer), pairs)
    assert rm.runtime.shortformer and not rm.runtime.has_mlp
    with torch.no_grad():
        ref = rm.model(rm.data.base)
    assert torch.equal(rm.runtime.clean(rm.data.base), ref)
    saved = torch.load(two_layer / "model_final.pth", weights_only=True)
    assert torch.equal(rm.model.blocks[1].attn.W_K, saved["blocks.1.attn.W_K"])
    assert torch.equal(rm.model.pos_embed.W_pos, saved["pos_embed.W_pos"])


def test_a_transformer_lens_name_not_cached_is_one_line(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    r = run_main(["test-circuit", "--model", "attn-only-4l", "--data", str(tmp_path / "x.csv"), "literature:docstring",
                  "--test", "sufficiency"])
    assert r.code == 2 and "'NeelNanda/Attn_Only_4L512W_C4_Code' could not be loaded (HF_HUB_OFFLINE is set" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
