"""The IOI high-level model (each node on hand-made sentences), its training objective, data,
tokenizer, and a short SIIT training run end to end (issue 16)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from cbench.errors import ArtifactError, UsageError
from cbench.tasks.interchange import run_interchanged, source_activations
from cbench.tasks.ioi_high_level import (IOIHighLevel, duplicate_positions, inhibited_tokens, last_position_valid)
from cbench.tasks.labels import NO_CLASS, high_level_classes
from cbench_builders.ioi import dataset as ioi, model as ioi_model, vocab as ioi_vocab

VOCAB = ioi_model.vocabulary()
TOK = {t: i for i, t in enumerate(VOCAB["tokens"])}
ABBA = "When Mary and John went to the store, John gave the drink to"
BABA = "When John and Mary went to the store, John gave the drink to"
ABC = "When Mary and John went to the store, Alice gave the drink to"


def enc(*texts: str) -> torch.Tensor:
    return torch.tensor([ioi_vocab.encode(t, VOCAB) for t in texts])


@pytest.fixture(scope="module")
def hl():
    return IOIHighLevel(len(VOCAB["tokens"]), [TOK[n] for n in VOCAB["name_tokens"]])


def words(text: str) -> list[str]:
    return ["<bos>"] + ioi_vocab.tokenize(text)


def test_duplicate_node_points_at_the_last_earlier_copy():
    w = words(ABBA)
    dup = duplicate_positions(enc(ABBA))[0].tolist()
    s1, s2 = w.index("John"), len(w) - 1 - w[::-1].index("John")
    assert dup[s2] == s1
    assert dup[len(w) - 1] == w.index("to")  # the final "to" repeats "went to"
    second_the = len(w) - 1 - w[::-1].index("the")
    assert dup[second_the] == w.index("the")
    repeated = {s2, len(w) - 1, second_the}
    assert all(d == -1 for i, d in enumerate(dup) if i not in repeated)
    # three copies: the latest earlier one
    assert duplicate_positions(torch.tensor([[0, 5, 7, 5, 5]]))[0].tolist() == [-1, -1, -1, 1, 3]


def test_s_inhibition_node_names_the_repeated_subject():
    x = enc(ABBA)
    inh = inhibited_tokens(x, duplicate_positions(x))[0].tolist()
    w = words(ABBA)
    s2 = len(w) - 1 - w[::-1].index("John")
    assert inh[s2] == TOK["John"]
    assert inh[w.index("Mary")] == -1 and inh[w.index("John")] == -1


@pytest.mark.parametrize("text,answer", [(ABBA, "Mary"), (BABA, "Mary"),
                                         ("When Anna and Peter went to the park, Anna gave the apple to", "Peter")])
def test_name_mover_predicts_the_indirect_object(hl, text, answer):
    logits = hl(enc(text))[0, -1]
    assert VOCAB["tokens"][int(logits.argmax())] == answer
    io, s = TOK[answer], TOK[next(n for n in ("Mary", "John", "Anna", "Peter") if n in text and n != answer)]
    assert float(logits[io]) == 10.0 and float(logits[s]) == 5.0  # +10 per mention, -15 once inhibited
    assert float(logits[TOK["to"]]) == -15.0  # a repeated non-name is inhibited too, never a name


def test_abc_has_no_answer(hl):
    cls = high_level_classes(hl(enc(ABC))[:, -1])
    assert int(cls[0]) == NO_CLASS  # three names at +10 tie


def test_interchanges_move_the_answer(hl):
    base = enc(ABBA)
    flip = enc(BABA)  # IO<->S1 flip: its S2 repeats position 2, where base has its IO
    rand = enc("When Lucy and Paul went to the store, Paul gave the drink to")
    for src, node, want in [(flip, "a0.h0", "John"),  # duplicate from the flip: base's Mary inhibited
                            (rand, "a1.h0", "John"),  # S-inhibition names Paul: nothing of base inhibited
                            (rand, "a2.h0", "Lucy"),  # the name mover's output is the source's answer
                            (base, "a1.h0", "Mary")]:
        out = hl(base, hl.acts(src), hl.mask(1, {node: True}))
        assert VOCAB["tokens"][int(out[0, -1].argmax())] == want, node
        # the hook path (what cbench verify uses) gives the same outputs
        ref = run_interchanged(hl, base, source_activations(hl, src, [node]), {node: True})
        assert torch.equal(ref, out)


def test_per_example_masks(hl):
    base = enc(ABBA, ABBA)
    src = enc("When Lucy and Paul went to the store, Paul gave the drink to",
              "When Lucy and Paul went to the store, Paul gave the drink to")
    mask = torch.tensor([[False, False, True], [False, False, False]])
    out = hl(base, hl.acts(src), mask)[:, -1].argmax(-1).tolist()
    assert [VOCAB["tokens"][i] for i in out] == ["Lucy", "Mary"]


def test_from_meta_reads_the_vocabulary_and_refuses_other_models():
    meta = ioi_model.model_meta(VOCAB)
    hl = IOIHighLevel.from_meta(meta)
    assert int(hl.is_name.sum()) == len(VOCAB["name_tokens"])
    with pytest.raises(ArtifactError, match="no IOI high-level model"):
        IOIHighLevel.from_meta({"case": "3", "input_tokens": ["a"]})
    bad = dict(meta, high_level=dict(meta["high_level"], name_tokens=["Zyx"]))
    with pytest.raises(ArtifactError, match="missing"):
        IOIHighLevel.from_meta(bad)


def test_objective_targets_next_tokens_and_the_last_answer(hl):
    obj = ioi_model.LastTokenObjective()
    x = enc(ABBA)
    t = obj.target(hl(x), x)
    assert t.shape == (1, x.shape[1] - 1)
    assert t[0, :-1].tolist() == x[0, 2:].tolist() and int(t[0, -1]) == TOK["Mary"]
    V = len(VOCAB["tokens"])
    perfect = torch.full((1, x.shape[1], V), -20.0)
    perfect[0, torch.arange(1, x.shape[1]), t[0]] = 20.0
    assert obj.agree(perfect, t) == 1.0 and float(obj.loss(perfect, t)) < 1e-6
    wrong_last = perfect.clone()
    wrong_last[0, -1] = perfect[0, -2]
    wrong_mid = perfect.clone()
    wrong_mid[0, 3] = perfect[0, 4]
    assert obj.agree(wrong_last, t) == 0.0 and obj.agree(wrong_mid, t) == 1.0  # scored at the last position
    # the last token weighs 10x an average other position
    assert float(obj.loss(wrong_last, t)) == pytest.approx(10 * 40.0, rel=1e-3)
    assert float(obj.loss(wrong_mid, t)) == pytest.approx(40.0 / (x.shape[1] - 2), rel=1e-3)


def test_truth_edges_map_the_high_level_edges():
    edges = ioi_model.truth_edges()
    assert len(edges) == 16 and "a4.h1->logits" in edges
    assert {"a1.h1->a2.h1<q>", "a1.h1->a2.h1<k>", "a1.h1->a2.h1<v>", "input->a4.h1<v>"} <= set(edges)
    assert not any(e.startswith(("a0.", "a3.", "a5.", "m")) for e in edges)


def test_tokenizer_and_pairs_from_dataset_rows():
    from cbench.tasks.ioi_data import COUNTERFACTUALS, pairs_from_rows
    from cbench.artifacts.tokenizer import build_tokenizer

    meta = ioi_model.model_meta(VOCAB)
    assert build_tokenizer(meta).encode(ABBA).ids == ioi_vocab.encode(ABBA, VOCAB)
    rows = ioi.generate_split("validation", 5, seed=3)
    data = pairs_from_rows(rows, meta)
    assert data.n_examples == 5 * len(COUNTERFACTUALS)
    lengths = data.valid.float().argmax(1)
    assert data.valid.sum(1).tolist() == [1] * data.n_examples  # the last real position only
    for i in range(data.n_examples):
        L = int(lengths[i]) + 1
        assert (data.base[i, L:] == TOK["<pad>"]).all() and (data.base[i, :L] != TOK["<pad>"]).all()
        assert (data.source[i, L:] == TOK["<pad>"]).all()
    with pytest.raises(UsageError, match="not in the IOI model's vocabulary"):
        pairs_from_rows([dict(rows[0], prompt="When Zorblax and Mary went")], meta)
    assert last_position_valid(data.base)[:, -1].all()


def test_short_training_run_end_to_end(tmp_path):
    """Tiny sizes: a few epochs of SIIT with edge strictness, checkpointed, resumed from the checkpoint."""
    from safetensors.torch import load_file

    from cbench_builders.ioi.build import _training_config, train

    ckpt = tmp_path / "ioi.safetensors"
    arch = {"n_layers": 5, "d_model": 16, "d_head": 4, "d_mlp": 32}
    cfg = _training_config(algorithm="summed", lr=1e-2, lr_end=1e-2, batch_size=32, epochs=3, pairs_per_epoch=64,
                           eval_pairs=16, edge_weight=1.0, seed=0, threads=1, target=0.995)
    s, result, times = train(cfg, 24, ckpt, resume=False, arch=arch)
    hist = result.history
    assert len(hist) == 3 and times["cpu_s"] > 0
    assert all(0.0 <= h[k] <= 1.0 for h in hist for k in ("accuracy", "iia", "siia", "edge_siia"))
    # IOI's ground truth has no edge the high-level model ignores: nothing to hold one at a time
    # (this read 0.0 for objective-trained models, so edge_siia, its minimum, was 0 and the stop
    # rule could never hold)
    assert all(h["invariant_edge_same"] == 1.0 for h in hist)
    assert all(h["loss_edge"] > 0 and h["loss_strict"] > 0 for h in hist)
    assert hist[-1]["loss_behavior"] < hist[0]["loss_behavior"]  # it learns (next words first)
    log = [json.loads(line) for line in ckpt.with_suffix(".log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3]
    saved = load_file(str(ckpt))
    assert torch.equal(saved["blocks.4.attn.W_O"], s.ll_model.state_dict()["blocks.4.attn.W_O"])
    # the run's times and recipe are recorded beside the checkpoint, and the benchmark reads them
    from cbench_builders.ioi.build import _record_run

    _record_run(ckpt, times, result)
    runs = json.loads(ckpt.with_suffix(".runs.json").read_text())
    assert runs[-1]["epochs"] == 3 and runs[-1]["recipe"] == {
        "algorithm": "summed", "lr": 1e-2, "batch_size": 32, "pairs_per_epoch": 64, "edge_weight": 1.0,
        "iit_weight": 1.0, "source_gradients": False}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_ioi import summarize

    table = summarize(tmp_path)
    assert "| 1 | 3 |" in table and "summed, lr 0.01, batch 32, 64 pairs/epoch, edge weight 1, IIT weight 1" in table
    # resuming starts from the saved weights
    cfg0 = _training_config(algorithm="summed", batch_size=32, epochs=0, pairs_per_epoch=64, eval_pairs=16,
                            edge_weight=1.0, seed=0, threads=1)
    s2, none, _ = train(cfg0, 24, ckpt, resume=True, arch=arch)
    assert none is None
    assert all(torch.equal(v, s2.ll_model.state_dict()[k]) for k, v in saved.items())
    with pytest.raises(UsageError, match="no checkpoint"):
        train(cfg0, 24, tmp_path / "missing.safetensors", resume=True, arch=arch)


def test_zero_output_init_and_source_gradients_options(tmp_path):
    """``--init zero-outputs`` starts every residual write at zero; ``source_gradients`` (on by
    default in ``cbench build ioi-model``) is what the trainer receives."""
    from click.testing import CliRunner

    from cbench_builders.ioi.build import _training_config, build_ioi_cmd

    arch = {"n_layers": 5, "d_model": 16, "d_head": 4, "d_mlp": 32}
    cfg = _training_config(algorithm="summed", batch_size=16, epochs=0, pairs_per_epoch=32, eval_pairs=8,
                           edge_weight=1.0, seed=0, threads=1, source_gradients=True)
    s = ioi_model.setup(cfg, 8, arch, init="zero-outputs")
    sd = s.ll_model.state_dict()
    for layer in range(5):
        for k in ("attn.W_O", "attn.b_O", "mlp.W_out", "mlp.b_out"):
            assert not sd[f"blocks.{layer}.{k}"].any()
    assert sd["blocks.0.attn.W_Q"].abs().sum() > 0 and s.trainer.cfg.source_gradients
    # the default start is TransformerLens's
    assert ioi_model.setup(cfg, 8, arch).ll_model.state_dict()["blocks.4.mlp.W_out"].abs().sum() > 0
    r = CliRunner().invoke(build_ioi_cmd, ["--init", "ones", "--checkpoint", str(tmp_path / "c.safetensors")])
    assert r.exit_code == 2 and "'ones' is not one of 'default', 'zero-outputs'" in r.output
    assert not (tmp_path / "c.safetensors").exists()


def test_average_is_the_mean_of_checkpoints_and_refuses_bad_ones(tmp_path):
    """``--average``: the element-wise mean of a run's checkpoints, recorded with their sha256;
    files of other tensors, non-checkpoints and a training run are refused with one line."""
    import hashlib

    from click.testing import CliRunner
    from safetensors.torch import save_file

    from cbench_builders.ioi.build import averaging_record, build_ioi_cmd, mean_weights

    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_file({"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.1])}, str(a))
    save_file({"w": torch.tensor([3.0, 6.0]), "b": torch.tensor([0.4])}, str(b))
    m = mean_weights([a, b])
    assert torch.equal(m["w"], torch.tensor([2.0, 4.0])) and m["b"].dtype == torch.float32
    assert torch.allclose(m["b"], torch.tensor([0.25]))
    rec = averaging_record([a, b])
    assert rec["epochs"] == 0 and rec["averaged"][1] == {"name": "b.safetensors",
                                                         "sha256": hashlib.sha256(b.read_bytes()).hexdigest()}
    c = tmp_path / "c.safetensors"
    save_file({"w": torch.tensor([1.0, 2.0, 3.0]), "b": torch.tensor([0.1])}, str(c))
    with pytest.raises(UsageError, match="holds other tensors"):
        mean_weights([a, c])
    not_ckpt = tmp_path / "notes.txt"
    not_ckpt.write_text("hello")
    with pytest.raises(UsageError, match="not a safetensors checkpoint"):
        mean_weights([a, not_ckpt])
    r = CliRunner().invoke(build_ioi_cmd, ["--average", str(a), "--out", str(tmp_path / "out")])
    assert isinstance(r.exception, UsageError) and "--average needs --no-train" in str(r.exception)  # exit 2 in main
    assert not (tmp_path / "out").exists()


def test_bench_table_prints_mibs_published_row_beside_cbenchs():
    from cbench.scoring.bench_summary import PUBLISHED, _markdown, _method_stats

    methods = ["random", "eap", "acdc"]
    auroc = {"ioi": {"random": 0.5, "eap": 0.9, "acdc": 0.8}}
    table = _markdown(auroc, {}, methods, _method_stats(auroc, methods), 1.0, kinds={"ioi": "siit"})
    rows = [line for line in table.splitlines() if line.startswith("| ioi |")]
    assert rows[0] == "| ioi | ioi | 0.500 | 0.900 | 0.800 |"
    assert rows[1] == "| ioi | MIB Table 2 (InterpBench, published) | 0.44 | 0.73 | – |"  # MIB ran no ACDC
    assert PUBLISHED["ioi"][1]["eap-ig-activations"] == 0.81


def test_ioi_pairs_are_never_sampled():
    from cbench.tasks.data import load_task_data

    with pytest.raises(UsageError, match="no sampled pairs"):
        load_task_data("ioi", ioi_model.model_meta(VOCAB), use_dataset=False)


@pytest.mark.slow
def test_artifact_of_a_short_run_carries_circuit_gates_card_and_tokenizer(tmp_path):
    """The artifact writer on a barely trained model (kept although its gates fail)."""
    from cbench.artifacts.model import read_model_artifact
    from cbench_builders.ioi.build import _training_config, train
    from cbench_builders.ioi.artifact import write_ioi_artifact

    cfg = _training_config(algorithm="summed", batch_size=32, epochs=1, pairs_per_epoch=32, eval_pairs=16,
                           edge_weight=1.0, seed=0, threads=1)
    s, result, times = train(cfg, 24, tmp_path / "c.safetensors", resume=False,
                             arch={"n_layers": 5, "d_model": 16, "d_head": 4, "d_mlp": 16})
    from cbench_builders.ioi.build import averaging_record

    runs = [{"wall_s": 1.0, "cpu_s": None, "epochs": 1, "recipe": {"algorithm": "summed", "lr": 0.01}},
            averaging_record([tmp_path / "c.safetensors"])]  # a run without CPU time or note, then an average
    out = write_ioi_artifact(s, tmp_path / "out", {"runs": runs, "wall_s": 1.0, "cpu_s": 0.0}, verify_pairs_n=14,
                             keep_failed=True)
    assert not out.released and out.meta["release_gate_failures"]
    art = read_model_artifact(out.path)
    assert art.case == "ioi" and art.circuit["edges"] == ioi_model.truth_edges()
    assert {e["high_level"] for e in art.correspondence["nodes"]} == {"duplicate", "s_inhibition", "name_mover"}
    assert art.meta["high_level"]["kind"] == "ioi" and "iia" in art.meta["gates"]
    assert art.tokenizer().encode(ABBA).ids == ioi_vocab.encode(ABBA, VOCAB)
    assert "Not released" in art.readme and "GPT-2" in art.readme
    assert "| 1 | 1 | 1.0 | not recorded | algorithm summed, lr 0.01 |" in art.readme
    assert "| 2 | 0 | 0.0 | 0.0 | no training (weights: the mean of 1 checkpoints" in art.readme


def test_zoo_pins_tell_a_model_from_a_dataset_of_the_same_name(tmp_path, monkeypatch):
    from cbench.hub.repos import RepoRef
    from cbench.hub.pull import zoo_pins

    (tmp_path / "releases").mkdir()
    (tmp_path / "releases" / "index.json").write_text(json.dumps({
        "cases": [{"case": "ioi", "repo": "cbench/ioi", "versions": [{"version": "v1.0.0", "revision": "a" * 40}]}],
        "datasets": [{"repo": "cbench/ioi", "versions": [{"version": "v1.0.0", "revision": "b" * 40}]}]}))
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path))
    assert zoo_pins(RepoRef("cbench/ioi", "model")) == {"v1.0.0": "a" * 40}
    assert zoo_pins(RepoRef("cbench/ioi", "dataset")) == {"v1.0.0": "b" * 40}
