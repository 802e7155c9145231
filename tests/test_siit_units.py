"""SIIT building blocks: the batched interchange forward pass, the correspondence, the circuit
mapping, the low-level architecture, input sampling, and the node-effect verification on a
hand-built model whose effects are known."""

from __future__ import annotations

import math

import pytest
import torch

from cbench.graph.graph import Graph
from cbench.artifacts.transformer_lens_adapter import build_model
from cbench_builders.siit.interchange import ComponentForward, model_components, run_interchanged, source_activations
from cbench_builders.siit.architecture import low_level_config, make_correspondence, map_circuit_edges
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import InputSet, make_input_set, task_inputs

torch.set_num_threads(1)


def _random_model(causal=True, attn_only=False, seed=0, n_layers=2, n_heads=3):
    cfg = dict(n_layers=n_layers, n_heads=n_heads, d_model=12, d_head=4, d_mlp=24, n_ctx=6, d_vocab=7,
               d_vocab_out=5, act_fn="relu", attn_only=attn_only, normalization_type=None,
               attention_dir="causal" if causal else "bidirectional", seed=seed, dtype="float32")
    model = build_model(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-1].startswith("b_"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


@pytest.mark.parametrize("causal,attn_only", [(True, False), (False, False), (True, True)])
def test_component_forward_matches_transformer_lens_and_hooks(causal, attn_only):
    model = _random_model(causal, attn_only)
    fast = ComponentForward(model)
    gen = torch.Generator().manual_seed(3)
    base = torch.randint(0, 7, (64, 6), generator=gen)
    source = torch.randint(0, 7, (64, 6), generator=gen)
    with torch.no_grad():
        assert torch.allclose(fast(base), model(base), atol=1e-5)
        # per-example masks: every component interchanged in a random half of the examples
        masks = {n: torch.rand(64, generator=gen) < 0.5 for n in fast.names}
        ref = run_interchanged(model, base, source_activations(model, source, fast.names), masks)
        got = fast(base, fast.acts(source), fast.mask(64, masks))
        assert torch.allclose(got, ref, atol=1e-5)
        assert not torch.allclose(got, fast(base), atol=1e-3)  # the interventions did something
        # interchanging everything at once on every example gives the source's outputs
        # only for the last layer's components read by logits: check one head alone instead
        one = {fast.names[0]: True}
        ref1 = run_interchanged(model, base, source_activations(model, source, [fast.names[0]]), one)
        assert torch.allclose(fast(base, fast.acts(source), fast.mask(64, one)), ref1, atol=1e-5)


def test_component_forward_gradients_reach_parameters():
    model = _random_model()
    fast = ComponentForward(model)
    tokens = torch.randint(0, 7, (8, 6), generator=torch.Generator().manual_seed(0))
    fast(tokens).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters()
               if n.startswith("blocks.1.mlp") or n.startswith("unembed"))


def test_low_level_config_follows_the_paper():
    hl = {"n_layers": 2, "n_heads": 1, "d_head": 6, "d_model": 13, "d_mlp": 1, "d_vocab": 6, "d_vocab_out": 1,
          "n_ctx": 5, "act_fn": "relu", "attention_dir": "causal", "model_name": "tracr-case-3", "dtype": "float32"}
    ll = low_level_config(hl, seed=7)
    assert (ll["n_layers"], ll["n_heads"], ll["d_head"], ll["d_model"], ll["d_mlp"]) == (2, 4, 3, 12, 48)
    assert (ll["d_vocab"], ll["d_vocab_out"], ll["n_ctx"], ll["attention_dir"]) == (6, 1, 5, "causal")
    assert ll["seed"] == 7 and ll["normalization_type"] is None
    big = low_level_config({**hl, "n_layers": 5, "n_heads": 6, "d_head": 9}, seed=0)
    assert (big["n_layers"], big["n_heads"], big["d_head"], big["d_model"]) == (5, 6, 4, 24)
    build_model(ll)  # a valid HookedTransformer config


def test_correspondence_is_seeded_and_layer_preserving():
    hl_nodes = ["m0", "a1.h0", "a1.h1", "m1", "a2.h0"]
    a = make_correspondence(hl_nodes, 4, seed=5)
    assert a == make_correspondence(hl_nodes, 4, seed=5)
    assert set(a) == set(hl_nodes)
    assert a["m0"] == "m0" and a["m1"] == "m1"
    for hl, ll in a.items():
        if hl.startswith("a"):
            assert ll.split(".")[0] == hl.split(".")[0]  # same layer
    assert a["a1.h0"] != a["a1.h1"]  # distinct heads within a layer
    seen = {tuple(sorted(make_correspondence(hl_nodes, 4, seed=s).items())) for s in range(20)}
    assert len(seen) > 1  # the head choice depends on the seed
    with pytest.raises(ValueError):
        make_correspondence(["a0.h0", "a0.h1", "a0.h2"], 2, seed=0)


def test_circuit_mapping_renames_heads_and_fits_the_low_level_graph():
    edges = ["input->m0", "input->a1.h0<q>", "input->a1.h0<k>", "m0->a1.h0<v>", "a1.h0->logits"]
    mapped = map_circuit_edges(edges, {"m0": "m0", "a1.h0": "a1.h2"})
    assert mapped == sorted(["input->m0", "input->a1.h2<q>", "input->a1.h2<k>", "m0->a1.h2<v>", "a1.h2->logits"])
    g = Graph(n_layers=2, n_heads=4)
    assert all(g.has_edge(e) for e in mapped)


def test_task_inputs_enumerate_small_spaces_and_sample_large_ones():
    tokens = ["BOS", "a", "b", "c", "x", "PAD"]
    small = task_inputs(tokens, "BOS", "PAD", 3, 1000, seed=0)
    assert small.shape == (64, 4) and len({tuple(r) for r in small.tolist()}) == 64
    assert (small[:, 0] == 0).all() and ((small[:, 1:] >= 1) & (small[:, 1:] <= 4)).all()
    big = task_inputs(tokens, "BOS", "PAD", 8, 500, seed=1)
    assert big.shape == (500, 9) and len({tuple(r) for r in big.tolist()}) == 500
    assert torch.equal(big, task_inputs(tokens, "BOS", "PAD", 8, 500, seed=1))


def test_input_set_lengths_follow_causality():
    meta = {"input_tokens": ["BOS", "a", "b", "PAD"], "bos_token": "BOS", "pad_token": "PAD",
            "min_seq_len": 2, "max_seq_len": 4, "causal": True}
    causal = make_input_set(meta, 100, seed=0)
    assert sorted(causal.train) == [4] and causal.shared  # 16 inputs < budget: train = validation
    bidir = make_input_set({**meta, "causal": False}, 100, seed=0)
    assert sorted(bidir.train) == [2, 3, 4]
    assert all(x.shape[1] == L + 1 for L, x in bidir.train.items())


def test_length_weighting_by_inputs_follows_each_lengths_input_count():
    from cbench_builders.siit.data import length_counts
    from cbench_builders.siit.trainer import SIITTrainer

    inputs = {3: torch.zeros(27, 4), 4: torch.zeros(81, 5), 5: torch.zeros(243, 6)}
    assert length_counts(inputs, 1000) == {3: 334, 4: 334, 5: 334}  # the default: equal shares
    by_inputs = length_counts(inputs, 1000, "inputs")
    assert by_inputs == {3: 77, 4: 231, 5: 693} and sum(by_inputs.values()) >= 1000
    pairs = SIITTrainer.eval_pairs(inputs, 100, seed=0, weighting="inputs")
    assert [len(b) for b, _ in pairs] == [8, 24, 70] and [b.shape[1] for b, _ in pairs] == [4, 5, 6]
    with pytest.raises(ValueError, match="length weighting"):
        TrainingConfig(length_weighting="longest")


def test_training_config_from_spec_and_overrides():
    spec = {"algorithm": "algorithm-1", "lr": 0.001, "betas": [0.9, 0.999], "siit_weight": 0.5, "unknown": 1}
    c = TrainingConfig.from_spec(spec, seed=3, epochs=None)
    assert (c.algorithm, c.betas, c.seed, c.lr_end, c.kind) == ("algorithm-1", (0.9, 0.999), 3, 0.001, "siit")
    s = TrainingConfig.from_spec(spec, algorithm="summed")
    assert s.betas == (0.9, 0.9) and s.lr_end == 2e-4  # the summed variant's defaults, not the spec's
    assert TrainingConfig.from_spec(spec, siit_weight=0.0).kind == "iit"
    with pytest.raises(ValueError):
        TrainingConfig(algorithm="sgd")


# ---------------------------------------------------------------------------- node effects, known by construction
def _one_mlp_model():
    """Tokens 1 (a) and 2 (b); only m0 matters: it copies the token's one-hot (residual dims 0-1) to
    dims 2-3, which the unembedding reads as classes a/b. Heads write nothing (W_O = 0); m1 writes
    nothing."""
    cfg = dict(n_layers=2, n_heads=2, d_model=4, d_head=2, d_mlp=2, n_ctx=5, d_vocab=3, d_vocab_out=2,
               act_fn="relu", normalization_type=None, attention_dir="causal", seed=0, dtype="float32")
    model = build_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[1, 0] = 1.0
        model.embed.W_E[2, 1] = 1.0
        for blk in model.blocks:
            blk.attn.W_Q.normal_()
            blk.attn.W_K.normal_()
            blk.attn.W_V.normal_()
        model.blocks[0].mlp.W_in[0, 0] = 1.0
        model.blocks[0].mlp.W_in[1, 1] = 1.0
        model.blocks[0].mlp.W_out[0, 2] = 1.0
        model.blocks[0].mlp.W_out[1, 3] = 1.0
        model.unembed.W_U[2, 0] = 1.0
        model.unembed.W_U[3, 1] = 1.0
    return model


def test_verify_node_effects_on_a_hand_built_model():
    from cbench_builders.siit.build import verify_node_effects

    model = _one_mlp_model()
    gen = torch.Generator().manual_seed(0)
    base = torch.randint(1, 3, (400, 5), generator=gen)
    source = torch.randint(1, 3, (400, 5), generator=gen)
    base[:, 0] = source[:, 0] = 0
    labels = base[:, 1:] - 1  # class of each token
    rows = {r["node"]: r for r in verify_node_effects(model, [(base, source)], [labels], "categorical", {"m0"})}
    assert set(rows) == set(model_components(model))
    assert rows["m0"]["in_circuit"] and not rows["a0.h0"]["in_circuit"]
    differ = (base[:, 1:] != source[:, 1:]).float().mean().item()
    assert rows["m0"]["resample"] == pytest.approx(differ, abs=1e-6)
    # zero ablation: every logit 0 -> argmax class 0 (a) -> wrong where the token is b
    assert rows["m0"]["zero"] == pytest.approx((labels == 1).float().mean().item(), abs=1e-6)
    # mean ablation: per position the mean one-hot of the sources -> their majority token
    majority = ((source[:, 1:] == 2).float().mean(0) > 0.5).long()
    assert rows["m0"]["mean"] == pytest.approx((labels != majority).float().mean().item(), abs=1e-6)
    for node in ("a0.h0", "a0.h1", "a1.h0", "a1.h1", "m1"):
        for kind in ("resample", "mean", "zero"):
            assert rows[node][kind] == 0.0, (node, kind)
    assert rows["m0"]["normalized_kl"] == pytest.approx(1.0, abs=1e-4)  # interchanging m0 = running the source
    assert abs(rows["a0.h0"]["normalized_kl"]) < 1e-6


def test_tied_high_level_outputs_have_no_class_and_are_not_scored():
    """RASP None: Tracr's output is all zeros there, every class ties; such positions are unlabelled."""
    from cbench_builders.datasets.high_level import NO_CLASS, high_level_classes
    from cbench_builders.siit.build import verify_node_effects

    logits = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 0.5], [0.3, 0.1, 0.0]]])
    assert high_level_classes(logits).tolist() == [[1, NO_CLASS, NO_CLASS, 0]]

    model = _one_mlp_model()
    gen = torch.Generator().manual_seed(1)
    base = torch.randint(1, 3, (200, 5), generator=gen)
    source = torch.randint(1, 3, (200, 5), generator=gen)
    base[:, 0] = source[:, 0] = 0
    labels = base[:, 1:] - 1
    unlabelled = labels.clone()
    unlabelled[:, -1] = NO_CLASS  # the last position has no class: effects count the other three only
    rows = {r["node"]: r for r in verify_node_effects(model, [(base, source)], [unlabelled], "categorical", {"m0"})}
    differ = (base[:, 1:-1] != source[:, 1:-1]).float().mean().item()
    assert rows["m0"]["resample"] == pytest.approx(differ, abs=1e-6)


def test_training_loss_and_agreement_skip_unlabelled_positions():
    from types import SimpleNamespace

    from cbench_builders.datasets.high_level import NO_CLASS
    from cbench_builders.siit.trainer import SIITTrainer

    fake = SimpleNamespace(numerical=False, cfg=SimpleNamespace(atol=0.05))
    out = torch.tensor([[[9.0, 9.0], [5.0, 0.0], [0.0, 5.0], [5.0, 0.0]]])  # position 0 (BOS) is never scored
    target = torch.tensor([[0, NO_CLASS, 0]])
    plain = torch.nn.functional.cross_entropy(out[0, [1, 3]], torch.tensor([0, 0]))
    assert SIITTrainer._loss(fake, out, target).item() == pytest.approx(plain.item(), rel=1e-6)
    assert SIITTrainer._agree(fake, out, target) == 1.0  # the wrong class sits where there is no label
    assert SIITTrainer._agree(fake, out, torch.full((1, 3), NO_CLASS)) == 1.0
    assert SIITTrainer._loss(fake, out, torch.full((1, 3), NO_CLASS)).item() == 0.0


# ---------------------------------------------------------------------------- zoo v2: architecture, correspondence, None
ORIGINAL_SIZES = {"3": (12, 3, 48), "4": (20, 5, 80), "13": (20, 5, 80), "8": (4, 1, 16), "20": (4, 1, 16),
                  "33": (4, 1, 16), "11": (12, 3, 48), "18": (26, 6, 104), "19": (32, 8, 128), "21": (50, 12, 200),
                  "26": (21, 5, 84), "29": (13, 3, 52), "34": (16, 4, 64), "35": (9, 2, 36), "36": (6, 1, 24),
                  "37": (12, 3, 48)}


@pytest.mark.parametrize("case", sorted(ORIGINAL_SIZES, key=int))
def test_interpbench_architecture_matches_the_original_code(case):
    import json
    from pathlib import Path

    from cbench_builders.siit.architecture import interpbench_low_level_config

    zoo = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
    hl = json.loads((zoo / f"tracr-case-{case}" / "v1.0.0" / "config.json").read_text())
    cfg = interpbench_low_level_config(hl, case)
    assert (cfg["d_model"], cfg["d_head"], cfg["d_mlp"]) == ORIGINAL_SIZES[case]
    assert cfg["act_fn"] == "gelu" and cfg["n_heads"] == max(4, hl["n_heads"]) and cfg["normalization_type"] is None
    dev = interpbench_low_level_config(hl, case, deviation={"d_model": 16, "d_head": 4})
    assert (dev["d_model"], dev["d_head"], dev["d_mlp"]) == (16, 4, 64)


def test_same_index_correspondence_and_overrides():
    from cbench_builders.siit.architecture import make_correspondence

    m = make_correspondence(["a0.h0", "a0.h1", "m0", "a1.h0"], 4, seed=3, policy="same-index")
    assert m == {"a0.h0": "a0.h0", "a0.h1": "a0.h1", "a1.h0": "a1.h0", "m0": "m0"}
    # InterpBench's case 3 maps frac_prevs to layer 1 head 2
    m = make_correspondence(["m0", "a1.h0"], 4, seed=3, policy="same-index", heads={"a1.h0": "a1.h2"})
    assert m["a1.h0"] == "a1.h2"
    with pytest.raises(ValueError, match="same layer"):
        make_correspondence(["a1.h0"], 4, seed=3, policy="same-index", heads={"a1.h0": "a0.h2"})
    with pytest.raises(ValueError, match="two high-level nodes"):
        make_correspondence(["a1.h0", "a1.h1"], 4, seed=3, policy="same-index", heads={"a1.h0": "a1.h1"})


def test_none_is_an_explicit_class_when_asked():
    from cbench.tasks.labels import NO_CLASS, high_level_classes

    logits = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    assert high_level_classes(logits).tolist() == [[NO_CLASS, 1]]
    assert high_level_classes(logits, none_class=3).tolist() == [[3, 1]]


def test_task_data_reads_null_labels_as_the_none_class_of_a_v2_model():
    from cbench.tasks.data import from_rows

    meta = {"input_tokens": ["BOS", "a", "b", "PAD"], "bos_token": "BOS", "pad_token": "PAD", "causal": True,
            "task_type": "categorical", "output_classes": ["a", "b"]}
    rows = [{"base_ids": [0, 1, 2], "source_ids": [0, 2, 1], "base_label": [None, 1]}]
    v1 = from_rows(rows, meta, "validation")
    assert v1.valid.tolist() == [[False, False, True]]
    v2 = from_rows(rows, {**meta, "none_class": 2, "output_classes": ["a", "b", "None"]}, "validation")
    assert v2.valid.tolist() == [[False, True, True]] and v2.labels[0, 1:].tolist() == [2, 1]
