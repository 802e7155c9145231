"""SIIT against a HookedTransformer high-level model through a correspondence (issue 45 item 4):
the general path (:mod:`cbench_builders.siit.hooked`), its two options (IIT over sets of nodes, the
distribution objective), and the stress tier's trained counterparts (:mod:`cbench_builders.stress.siit`),
on tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("cbench_builders")

from cbench.artifacts.transformer_lens_adapter import build_model, config_to_json  # noqa: E402
from cbench.errors import BuildError  # noqa: E402
from cbench_builders.siit.config import TrainingConfig  # noqa: E402
from cbench_builders.siit.hooked import (check_correspondence, circuit_components, low_level_shape,  # noqa: E402
                                         train_hooked, whole_space)
from cbench_builders.siit.interchange import ComponentForward, run_interchanged, source_activations  # noqa: E402
from cbench_builders.siit.losses import DistributionObjective  # noqa: E402
from cbench_builders.stress import designs as D  # noqa: E402
from cbench_builders.stress import siit as S  # noqa: E402

torch.set_num_threads(1)


def _with_biases(model, seed=1):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-1].startswith("b_"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def _hl():
    return S.high_level_model(D.neg_1())


@pytest.mark.parametrize("which", ["low-level", "high-level"])
def test_fast_interchange_equals_the_hook_reference_on_the_new_shapes(which):
    """The low-level shape of the counterparts (6 heads of 10, d_model 60: no multiple of the
    8-wide slots, bidirectional) and a hand-set stress model as the high-level model: the fast
    forward with per-example masks equals TransformerLens's hooks."""
    hl = _hl()
    if which == "low-level":
        model = _with_biases(build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60,
                                                         d_mlp=96, n_layers=2, seed=3)))
        assert (model.cfg.d_model, model.cfg.n_heads, model.cfg.d_head) == (60, 6, 10)
    else:
        model = hl
    fast = ComponentForward(model)
    gen = torch.Generator().manual_seed(5)
    base = torch.randint(1, 9, (48, 5), generator=gen)
    source = torch.randint(1, 9, (48, 5), generator=gen)
    base[:, 0] = source[:, 0] = 0
    with torch.no_grad():
        assert torch.allclose(fast(base), model(base), atol=1e-4)
        masks = {n: torch.rand(48, generator=gen) < 0.5 for n in fast.names}
        ref = run_interchanged(model, base, source_activations(model, source, fast.names), masks)
        got = fast(base, fast.acts(source), fast.mask(48, masks))
        assert torch.allclose(got, ref, atol=1e-4)
        assert not torch.allclose(got, fast(base), atol=1e-3)


def test_the_high_level_model_is_the_design_without_its_floor():
    d = D.neg_1()
    hl, full = S.high_level_model(d), d.kit.model()
    x = whole_space(["BOS", *D.VOCAB], "BOS", 4).train[4]
    assert x.shape == (8 ** 4, 5)
    with torch.no_grad():
        # the floor heads a0.h2, a0.h3 write nothing; the circuit's heads are untouched
        assert float(hl.blocks[0].attn.W_O[2:].abs().max()) == 0.0
        assert torch.equal(hl.blocks[0].attn.W_O[:2], full.blocks[0].attn.W_O[:2])
        assert torch.equal(hl(x)[:, 1:].argmax(-1), full(x)[:, 1:].argmax(-1))


def test_iit_sets_single_draws_as_before_and_mixed_draws_non_empty_sets():
    hl = _hl()
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60, seed=0))
    mapping = {"a0.h0": "a0.h3", "a0.h1": "a0.h5"}
    edges = S.circuit_edges(D.neg_1())
    from cbench_builders.siit.trainer import SIITTrainer

    single = SIITTrainer(hl, ll, mapping, "categorical", TrainingConfig())
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    j = torch.randint(2, (64,), generator=g2)
    hl_mask, ll_mask = single._iit_masks(64, g1)
    ref_hl, ref_ll = single._hl_masks(j)
    assert torch.equal(hl_mask, ref_hl) and torch.equal(ll_mask, ref_ll)  # the Tracr path's draws, unchanged

    mixed = SIITTrainer(hl, ll, mapping, "categorical", TrainingConfig(iit_sets="mixed"))
    hl_mask, ll_mask = mixed._iit_masks(4000, torch.Generator().manual_seed(1))
    hl_cols = [mixed.hl_f.index[n] for n in mapping]
    ll_cols = [mixed.ll_f.index[mapping[n]] for n in mapping]
    sets = hl_mask[:, hl_cols]
    assert bool(sets.any(1).all())  # never empty
    assert bool((sets.sum(1)[:2000] == 1).all())  # the first half: one node each
    both = float((sets.sum(1)[2000:] == 2).float().mean())
    assert 0.4 < both < 0.6  # the second half: {j} plus the other with probability 1/2
    assert torch.equal(ll_mask[:, ll_cols], sets)  # each low-level image with its node
    assert int(ll_mask.sum()) == int(sets.sum())  # and nothing else
    assert hl_mask.sum(1).max() <= 2 and not hl_mask[:, [c for c in range(hl_mask.shape[1]) if c not in hl_cols]].any()
    assert set(circuit_components(edges)) == set(mapping)


def test_iit_node_weights_draw_nodes_in_proportion_and_refuse_unknown_nodes():
    hl = _hl()
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60, seed=0))
    mapping = {"a0.h0": "a0.h3", "a0.h1": "a0.h5"}
    from cbench_builders.siit.trainer import SIITTrainer

    weighted = SIITTrainer(hl, ll, mapping, "categorical", TrainingConfig(iit_node_weights={"a0.h1": 3}))
    hl_mask, ll_mask = weighted._iit_masks(8000, torch.Generator().manual_seed(2))
    share = float(hl_mask[:, weighted.hl_f.index["a0.h1"]].float().mean())
    assert 0.72 < share < 0.78  # 3 : 1 against a0.h0, whose weight is left at 1
    assert torch.equal(ll_mask[:, weighted.ll_f.index["a0.h5"]], hl_mask[:, weighted.hl_f.index["a0.h1"]])
    assert int(hl_mask.sum()) == 8000  # one node per example
    with pytest.raises(ValueError, match="a9.h9, not high-level nodes"):
        SIITTrainer(hl, ll, mapping, "categorical", TrainingConfig(iit_node_weights={"a9.h9": 2}))
    with pytest.raises(ValueError, match="positive numbers"):
        TrainingConfig(iit_node_weights={"a0.h1": 0})


def test_mixed_invariant_edge_sampling_ablates_an_ignored_edge_alone_in_half_the_single_examples():
    hl = _hl()
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60, seed=0))
    mapping = {"a0.h0": "a0.h3", "a0.h1": "a0.h5"}
    truth = ["input->a0.h3<v>", "input->a0.h3<q>", "input->a0.h5<k>", "a0.h3->logits", "a0.h5->logits"]
    from cbench.runtime import edge_names_to_mask
    from cbench_builders.siit.trainer import SIITTrainer

    def masks(sampling):
        cfg = TrainingConfig(edge_weight=1.0, edge_sampling=sampling)
        t = SIITTrainer(hl, ll, mapping, "categorical", cfg, truth_edges=truth, invariant_edges=truth[1:3])
        return t, t._edge_masks(6000, torch.Generator().manual_seed(4))

    t, keep = masks("mixed-invariant")
    inv = torch.as_tensor(edge_names_to_mask(t.runtime.graph, truth[1:3]))
    singles = (keep == 0).sum(1) == 1
    alone = singles & (keep[:, inv] == 0).any(1)
    assert 0.4 < float(alone.sum() / singles.sum()) < 0.6  # half the single-edge examples
    assert not bool((keep[:, torch.as_tensor(edge_names_to_mask(t.runtime.graph, [truth[0], *truth[3:]]))] == 0).any())
    _, plain = masks("mixed")
    plain_singles = (plain == 0).sum(1) == 1
    assert float((plain_singles & (plain[:, inv] == 0).any(1)).sum() / plain_singles.sum()) < 0.1


def test_invariant_edge_weights_draw_the_ignored_edges_in_proportion_and_refuse_other_edges():
    hl = _hl()
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60, seed=0))
    mapping = {"a0.h0": "a0.h3", "a0.h1": "a0.h5"}
    truth = ["input->a0.h3<v>", "input->a0.h3<q>", "input->a0.h5<k>", "a0.h3->logits", "a0.h5->logits"]
    from cbench.runtime import edge_names_to_mask
    from cbench_builders.siit.trainer import SIITTrainer

    cfg = TrainingConfig(edge_weight=1.0, edge_sampling="mixed-invariant",
                         invariant_edge_weights={"input->a0.h5<k>": 4})
    t = SIITTrainer(hl, ll, mapping, "categorical", cfg, truth_edges=truth, invariant_edges=truth[1:3])
    keep = t._edge_masks(12000, torch.Generator().manual_seed(5))
    singles = (keep == 0).sum(1) == 1
    q, k = (torch.as_tensor(edge_names_to_mask(t.runtime.graph, [e])).nonzero()[0, 0] for e in truth[1:3])
    n_q, n_k = int((singles & (keep[:, q] == 0)).sum()), int((singles & (keep[:, k] == 0)).sum())
    assert 0.76 < n_k / (n_q + n_k) < 0.84  # 4 : 1 (the uniform single-edge draw adds a few of each)
    assert 0.4 < (n_q + n_k) / float(singles.sum()) < 0.6  # still half the single-edge examples
    with pytest.raises(ValueError, match="input->a0.h3<v>, not a ground-truth edge the program ignores"):
        SIITTrainer(hl, ll, mapping, "categorical",
                    TrainingConfig(edge_weight=1.0, invariant_edge_weights={"input->a0.h3<v>": 2}),
                    truth_edges=truth, invariant_edges=truth[1:3])
    with pytest.raises(ValueError, match="positive numbers"):
        TrainingConfig(invariant_edge_weights={"input->a0.h5<k>": float("inf")})


def test_distribution_objective_is_zero_at_the_target_and_skips_ties():
    obj = DistributionObjective()
    hl = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]]])  # BOS, class 0, a tie
    t = obj.target(hl)
    assert float(obj.loss(hl, t)) == pytest.approx(0.0, abs=1e-7)
    other = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 1.0, 1.0]]])
    assert float(obj.loss(other, t)) > 0.5
    assert obj.agree(hl, t) == 1.0  # the tie is not scored
    assert obj.agree(other, t) == 0.0


def test_translate_maps_node_and_edge_names_in_gate_specs():
    spec = {"kind": "redundancy", "groups": {"a0.h0": ["input->a0.h0<v>", "a0.h0->m1"]}, "need": 2,
            "head": "a1.h0", "note": "a0.h0 stays in free text"}
    out = S.translate(spec, {"a0.h0": "a0.h4", "m1": "m1", "a1.h0": "a1.h2"})
    assert out == {"kind": "redundancy", "groups": {"a0.h4": ["input->a0.h4<v>", "a0.h4->m1"]}, "need": 2,
                   "head": "a1.h2", "note": "a0.h0 stays in free text"}


def test_check_correspondence_maps_the_circuit_and_refuses_what_cannot_hold():
    hl = S.high_level_model(D.neg_2())  # a0.h0 -> a1.h0 <v>: the order must survive the mapping
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=6, d_head=10, d_model=60, seed=0))
    edges = S.circuit_edges(D.neg_2())
    truth = check_correspondence({"a0.h0": "a0.h5", "a1.h0": "a1.h1"}, edges, hl, ll)
    assert "a0.h5->a1.h1<v>" in truth and "input->a1.h1<q>" in truth and len(truth) == len(edges)
    with pytest.raises(BuildError, match="does not map"):
        check_correspondence({"a0.h0": "a0.h5"}, edges, hl, ll)
    with pytest.raises(BuildError, match="no edge of the low-level graph"):
        check_correspondence({"a0.h0": "a1.h5", "a1.h0": "a0.h1"}, edges, hl, ll)
    with pytest.raises(BuildError, match="do not have"):
        check_correspondence({"a0.h0": "a0.h9", "a1.h0": "a1.h1"}, edges, hl, ll)
    with pytest.raises(BuildError, match="two high-level nodes"):
        check_correspondence({"a0.h0": "a1.h1", "a1.h0": "a1.h1"}, edges, hl, ll)


def test_train_hooked_learns_and_resumes_from_its_checkpoint(tmp_path):
    """A few epochs on the negative design against a differently shaped low-level model: the loss
    falls, the ground truth is the design's circuit through the correspondence, and a run stopped
    after two epochs and resumed ends where an uninterrupted run does."""
    d = D.neg_1()
    hl = S.high_level_model(d)
    data = whole_space(["BOS", *D.VOCAB], "BOS", 4)
    ll_cfg = low_level_shape(config_to_json(hl.cfg), n_heads=5, d_head=6, d_model=27, d_mlp=16, seed=2)
    mapping = {"a0.h0": "a0.h2", "a0.h1": "a0.h4"}
    base = dict(algorithm="summed", lr=5e-3, lr_decay_epochs=4, batch_size=256, edge_weight=1.0, source_gradients=True,
                iit_sets="mixed", train_size=4096, pairs_per_epoch=512, eval_pairs=100, seed=3)

    def run(epochs, ckpt=None):
        return train_hooked(hl, ll_cfg, mapping, S.circuit_edges(d), data, TrainingConfig(epochs=epochs, **base),
                            invariant_hl_edges=sorted(d.marked), objective=DistributionObjective(), checkpoint=ckpt)

    full = run(4)
    assert full.truth_edges == sorted(S.translate(S.circuit_edges(d), mapping))
    assert full.invariant_edges == sorted(S.translate(sorted(d.marked), mapping))
    h = full.result.history
    assert len(h) == 4 and h[-1]["loss_iit"] < h[0]["loss_iit"]
    ckpt = tmp_path / "neg.pt"
    run(2, ckpt)
    resumed = run(4, ckpt)
    assert [r["loss_iit"] for r in resumed.result.history] == pytest.approx([r["loss_iit"] for r in h], rel=1e-5)
    for k, v in full.result.model.state_dict().items():
        assert torch.allclose(v, resumed.result.model.state_dict()[k], atol=1e-6), k


def test_a_trained_stress_artifact_is_verified_with_the_siit_gates_too(tmp_path):
    """``cbench verify``'s path for a stress artifact with ``high_level/`` and a correspondence:
    the hand-set tier's gates and the SIIT node gates (an untrained model fails them, named)."""
    from cbench.artifacts.model import read_model_artifact, write_model_artifact
    from cbench.runtime import CircuitRuntime
    from cbench.verify.artifact import verify_artifact
    from cbench_builders.siit.build import correspondence_document

    c = S.Counterpart("stress-neg-siit-test", "neg-1", n_heads=5, d_head=6, d_model=27, d_mlp=16)
    d = D.neg_1()
    hl = S.high_level_model(d)
    mapping = {"a0.h0": "a0.h2", "a0.h1": "a0.h4"}
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=5, d_head=6, d_model=27, d_mlp=16, seed=0))
    graph = CircuitRuntime(ll).graph
    circuit = S.circuit_of(c, d, mapping, graph)
    assert circuit["mechanism"]["gates"][0]["component"] == ["a0.h4->logits"]
    assert circuit["edge_classes"]["a0.h4->logits"] == "negative"
    shape = {"n_layers": 1, "n_heads": 5, "has_mlp": True, "parallel_attn_mlp": False}
    corr = correspondence_document(c.name, mapping, {}, shape, {**shape, "n_heads": 4}, 0)
    hl_dir = S._hl_artifact(d, hl, tmp_path / "hl", f"cbench/{c.name}")
    hl_card = (hl_dir / "README.md").read_text()  # front matter and the loading section, as every model card
    assert hl_card.startswith("---\nlicense: mit\n") and "- stress-tier\n- negative\n" in hl_card
    assert "## Load without cbench" in hl_card and "bridge = TransformerBridge.boot_native(" in hl_card
    write_model_artifact(tmp_path / c.name, ll, S.meta_of(c, d), circuit, correspondence=corr, readme="# test\n",
                         subartifacts={"high_level": hl_dir})
    report = verify_artifact(read_model_artifact(tmp_path / c.name), n_pairs=60, use_dataset=False)
    names = {g.name for g in report.gates}
    assert {"complement_edge_effect", "floor", "negative_raises_the_answer_when_removed", "accuracy", "iia",
            "siia", "max_out_of_circuit_node_effect"} <= names
    assert not report.passed and not next(g for g in report.gates if g.name == "accuracy").passed
    assert json.loads((tmp_path / c.name / "high_level" / "meta.json").read_text())["case"] == "stress-neg-1"


def test_a_counterparts_card_is_written_in_todays_form():
    """The card ``cbench build stress-siit`` writes (here from a released counterpart's files) ends
    with the "Load without cbench" section, which the released v1.0.0 cards lacked, so a re-release
    would change nothing in it; a card without front matter (v1.0.0's ``high_level/``) gains
    front matter and the section there."""
    from cbench.verify.gates import Gate, VerifyReport
    from cbench_builders.release.cards import refresh_card

    art = Path(__file__).resolve().parents[1] / "model_zoo/releases/models/cbench/stress-and-siit-1/v1.0.0"
    if not art.is_dir():
        pytest.skip("stress-and-siit-1 is not released in this tree")
    meta, circuit = (json.loads((art / f).read_text()) for f in ("meta.json", "circuit.json"))
    config = json.loads((art / "config.json").read_text())
    mapping = {n["high_level_node"]: n["low_level"][0]["node"]
               for n in json.loads((art / "correspondence.json").read_text())["nodes"]}
    report = VerifyReport(meta["case"], "stress", [Gate(name, pairs, g[pairs], g["op"], g["threshold"], g["passed"])
                                                   for name, g in meta["gates"].items()
                                                   for pairs in ("validation", "fresh") if pairs in g], [])
    c = S.COUNTERPARTS["stress-and-siit-1"]
    text = S.card(c, S.design_of(c), meta, circuit, report, config, mapping)
    assert text.index("## Predictions") < text.index("## Load without cbench")
    assert 'name_or_path="cbench/stress-and-siit-1"' in text and 'to_tokens("a b c")' in text
    assert refresh_card(text, meta, "cbench/stress-and-siit-1") == (text, [])
    assert "## Load without cbench" not in (art / "README.md").read_text()  # what the re-release added
    hl_meta = json.loads((art / "high_level" / "meta.json").read_text())
    refreshed, changes = refresh_card((art / "high_level" / "README.md").read_text(), hl_meta, "cbench/stress-and-siit-1")
    assert len(changes) == 2 and refreshed.startswith("---\nlicense: mit\n") and "## Load without cbench" in refreshed
    assert refresh_card(refreshed, hl_meta, "cbench/stress-and-siit-1") == (refreshed, [])


def test_edge_level_iit_ablates_circuit_edges_in_a_share_of_rows_with_the_high_level_target():
    """``edge_iit``: in the chosen rows the keep-mask also drops circuit edges (never the invariant
    ones), and each row's target is the high-level model's output under that very ablation."""
    from cbench.runtime import CircuitRuntime, edge_names_to_mask
    from cbench_builders.siit.trainer import SIITTrainer

    d = D.neg_1()
    hl = S.high_level_model(d)
    ll = build_model(low_level_shape(config_to_json(hl.cfg), n_heads=5, d_head=6, d_model=27, d_mlp=16, seed=0))
    mapping = {"a0.h0": "a0.h2", "a0.h1": "a0.h4"}
    truth = S.translate(S.circuit_edges(d), mapping)
    inv = S.translate(sorted(d.marked), mapping)
    cfg = TrainingConfig(edge_weight=1.0, edge_iit=0.5)
    t = SIITTrainer(hl, ll, mapping, "categorical", cfg, truth_edges=truth, invariant_edges=inv,
                    objective=DistributionObjective())
    gen = torch.Generator().manual_seed(0)
    B = 400
    base = torch.randint(1, 9, (B, 5), generator=gen)
    source = torch.randint(1, 9, (B, 5), generator=gen)
    base[:, 0] = source[:, 0] = 0
    keep0 = t._edge_masks(B, gen)
    keep, target = t._edge_iit(keep0, base, source, gen)
    g = t.runtime.graph
    circuit_cols = [g.edge_index(e) for e in sorted(set(truth) - set(inv))]
    other = [i for i in range(g.n_edges) if i not in circuit_cols]
    assert torch.equal(keep[:, other], keep0[:, other])  # only circuit edges are added
    assert bool((keep0[:, circuit_cols] == 1).all())
    dropped = (keep[:, circuit_cols] == 0).any(1)
    assert 0.4 < float(dropped.float().mean()) < 0.6
    assert not {g.edge_index(e) for e in inv} & set(circuit_cols)  # the invariant ones: edge strictness's, untouched
    hl_rt = CircuitRuntime(hl)
    back = {v: k for k, v in mapping.items()}
    for b in torch.nonzero(dropped).flatten()[:5].tolist():
        names = [g.edges[i].name for i in circuit_cols if keep[b, i] == 0]
        hl_names = [S.translate(n, back) for n in names]
        hk = torch.as_tensor(~edge_names_to_mask(hl_rt.graph, hl_names), dtype=hl_rt.dtype)
        with torch.no_grad():
            out = hl_rt.run(base[b:b + 1], source=source[b:b + 1], edge_mask=hk, ablation="resample").output
        assert torch.allclose(target[b], torch.log_softmax(out[0, 1:], -1), atol=1e-5)
    clean_rows = torch.nonzero(~dropped).flatten()
    with torch.no_grad():
        assert torch.allclose(target[clean_rows], torch.log_softmax(hl(base[clean_rows])[:, 1:], -1), atol=1e-5)


def test_min_epochs_trains_on_after_the_targets_and_keeps_the_last_epoch():
    """With every target met from the first epoch, training stops at ``min_epochs`` and keeps that
    epoch's weights (a tie goes to the later epoch up to ``min_epochs``); without it, at epoch 1."""
    d = D.neg_1()
    hl = S.high_level_model(d)
    data = whole_space(["BOS", *D.VOCAB], "BOS", 4)
    ll_cfg = low_level_shape(config_to_json(hl.cfg), n_heads=5, d_head=6, d_model=27, d_mlp=16, seed=2)
    mapping = {"a0.h0": "a0.h2", "a0.h1": "a0.h4"}
    base = dict(algorithm="summed", batch_size=512, edge_weight=1.0, train_size=4096, pairs_per_epoch=512,
                eval_pairs=100, seed=3, target=0.0, edge_target=0.0, node_target=0.0, epochs=6)
    runs = {m: train_hooked(hl, ll_cfg, mapping, S.circuit_edges(d), data, TrainingConfig(min_epochs=m, **base),
                            invariant_hl_edges=sorted(d.marked), objective=DistributionObjective()).result
            for m in (0, 3)}
    assert (runs[0].epochs, runs[0].best_epoch) == (1, 1)
    assert (runs[3].epochs, runs[3].best_epoch) == (3, 3)


# The releases of cbench/stress-counterfactuals made by extend_release, each from the one before it:
# (previous, release, what was added). v1.3.0 and v1.5.0 took every counterpart built then (v1.5.0
# re-drew the five of v1.3.0 beside stress-dist-siit-1, in the counterparts' order), v1.6.0 the
# second held-out round's designs (`cbench build stress-dataset --extend-release`, the registry's order).
EXTENDED = [("v1.2.0", "v1.3.0", "counterparts"), ("v1.4.0", "v1.5.0", "counterparts"), ("v1.5.0", "v1.6.0", "designs")]


@pytest.mark.slow  # 25-60 s each at load 2: the added models' rows, the earlier configs copied
@pytest.mark.parametrize("previous,release,added", EXTENDED, ids=[r for _p, r, _a in EXTENDED])
def test_the_released_stress_dataset_is_rebuilt_byte_for_byte_with_the_counterparts(tmp_path, previous, release,
                                                                                     added):
    """``extend_release`` (``cbench build stress-siit --dataset-out``, ``cbench build stress-dataset
    --extend-release``), from the released models: every file of each release it made again, from the
    release before it, the added models' rows labelled with their own answers, the earlier configs
    copied. (It used to take every counterpart released today as v1.3.0's; stress-dist-siit-1 came
    in v1.5.0.)"""
    from cbench.hub.zoo import zoo_dir
    from cbench_builders.stress.dataset import extend_release
    from cbench_builders.stress.registry import DESIGNS

    zoo = Path(zoo_dir())
    base = zoo / "releases" / "datasets" / "cbench" / "stress-counterfactuals"
    released = base / release
    if not released.is_dir() or not (base / previous).is_dir():
        pytest.skip(f"stress-counterfactuals {release} is not released in this tree")
    configs = {p.name for p in released.iterdir() if p.is_dir()}
    if added == "counterparts":
        names = [n for n in S.COUNTERPARTS if n in configs]
    else:
        names = [f"stress-{n}" for n in DESIGNS if f"stress-{n}" in configs - {p.name for p in (base / previous).iterdir()}]
    assert names
    built = tmp_path / "built"
    built.mkdir()
    for n in names:
        (built / n).symlink_to(zoo / "releases" / "models" / "cbench" / n / "v1.0.0")
    out = tmp_path / "stress-counterfactuals"
    scratch = tmp_path / "zoo" / "releases"  # the release the function starts from (its newest)
    (scratch / "datasets" / "cbench" / "stress-counterfactuals").mkdir(parents=True)
    (scratch / "datasets" / "cbench" / "stress-counterfactuals" / previous).symlink_to(base / previous)
    (scratch / "models").symlink_to(zoo / "releases" / "models")
    extend_release(out, built, names, tmp_path / "zoo", echo=lambda _line: None)
    want = sorted(p.relative_to(released).as_posix() for p in released.rglob("*") if p.is_file())
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert got == want
    for rel in want:
        assert (out / rel).read_bytes() == (released / rel).read_bytes(), rel
