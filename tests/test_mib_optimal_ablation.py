"""Optimal ablation under `--protocol mib` (docs/mib-parity.md divergence 20) against a
reimplementation of MIB's `oa.py::OptimalAblationFinder` and EAP-IG's `load_ablations` written
here with TransformerLens hooks, as that code places them: `compute_means` (the sum over batch
and positions, averaged over drawn batches), `compute_optimal_ablation` (each component replaced
alone at hook_embed / attn.hook_result (a layer's heads together) / hook_mlp_out /
hook_resid_post, next-token cross-entropy over the prompt, one Adam per component, the training
loss checked every 10 steps with patience 3, the last vectors kept), and the loader that gives
head 0 of each layer its vector and the other heads zeros. Same draws (the batches each step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cbench.artifacts import transformer_lens_adapter as tla
from cbench.runtime import CircuitRuntime
from cbench.runtime import optimal_ablation_mib as oam
from circuit_models import random_model, random_tokens

SETTINGS = oam.MibOptimalAblationSettings(num_steps=40, check_every=10, patience=3, batch_size=5, seed=3)


@pytest.fixture(scope="module")
def lm():
    model = random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=21, d_vocab=9, d_vocab_out=9,
                         weight_scale=1.5)
    tla.enable_edge_hooks(model)
    return model, CircuitRuntime(model), random_tokens(12, 6, 9, seed=5)


def _components(model):
    L = model.cfg.n_layers
    return (["hook_embed"] + [n for layer in range(L) for n in (f"blocks.{layer}.attn.hook_result",
                                                                  f"blocks.{layer}.hook_mlp_out")]
            + [f"blocks.{L - 1}.hook_resid_post"])


def reference_means(model, tokens, s):
    names = _components(model)
    gen = torch.Generator().manual_seed(s.seed + 1)
    total = {n: 0.0 for n in names}
    for _ in range(s.num_steps):
        idx = torch.randperm(tokens.shape[0], generator=gen)[:s.batch_size]
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens[idx], names_filter=lambda n: n in names)
        for n in names:
            total[n] = total[n] + cache[n].sum(dim=1).sum(dim=0)
    return {n: v / s.num_steps for n, v in total.items()}


def reference_oa(model, tokens, s):
    means = reference_means(model, tokens, s)
    values = {n: torch.nn.Parameter(means[n].clone()) for n in means}
    opts = {n: torch.optim.Adam([values[n]], lr=s.lr) for n in values}
    gen = torch.Generator().manual_seed(s.seed)
    best, not_improved = float("inf"), 0
    for step in range(s.num_steps):
        idx = torch.randperm(tokens.shape[0], generator=gen)[:s.batch_size]
        batch = tokens[idx]
        total = 0.0
        for n, value in values.items():
            opts[n].zero_grad()

            def replace(x, hook, value=value):
                return value.expand(*x.shape[:2], *value.shape).reshape(x.shape)
            logits = model.run_with_hooks(batch, fwd_hooks=[(n, replace)])
            loss = torch.nn.CrossEntropyLoss()(logits[..., :-1, :].reshape(-1, logits.shape[-1]),
                                               batch[..., 1:].reshape(-1))
            loss.backward()
            opts[n].step()
            total += loss.item()
        if step % s.check_every == 0:
            if total / len(values) < best:
                best, not_improved = total / len(values), 0
            else:
                not_improved += 1
                if not_improved >= s.patience:
                    break
    return {n: v.detach() for n, v in values.items()}, step + 1


def reference_load(model, g, values) -> torch.Tensor:
    out = torch.zeros(len(g.forward_nodes), model.cfg.d_model)
    done = set()
    for node in g.forward_nodes:
        if node == "input":
            out[0] = values["hook_embed"]
        elif node.startswith("a"):
            layer, head = int(node[1:].split(".")[0]), int(node.split("h")[-1])
            if layer in done:
                continue
            done.add(layer)
            out[g.forward_index(node)] = values[f"blocks.{layer}.attn.hook_result"][head]
        else:
            out[g.forward_index(node)] = values[f"blocks.{int(node[1:])}.hook_mlp_out"]
    return out


def _ours_by_component(rt, vectors):
    g = rt.graph
    out = {"hook_embed": vectors[0], f"blocks.{rt.n_layers - 1}.hook_resid_post": vectors[-1]}
    for layer in range(rt.n_layers):
        out[f"blocks.{layer}.attn.hook_result"] = torch.stack([vectors[g.forward_index(f"a{layer}.h{h}")]
                                                               for h in range(rt.n_heads)])
        out[f"blocks.{layer}.hook_mlp_out"] = vectors[g.forward_index(f"m{layer}")]
    return out


def test_means_are_batch_times_length_times_the_mean_as_compute_means_sums_them(lm):
    model, rt, tokens = lm
    ours = _ours_by_component(rt, oam.mean_init(rt, tokens, SETTINGS))
    ref = reference_means(model, tokens, SETTINGS)
    for n in ref:
        assert torch.allclose(ours[n].reshape(ref[n].shape), ref[n], rtol=1e-5, atol=1e-5), n
    # batch x length x the mean, not the mean
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "hook_embed")
    mean = cache["hook_embed"].mean((0, 1))
    assert ours["hook_embed"].norm() > 10 * mean.norm()


def test_training_and_loading_equal_the_reference_code(lm):
    model, rt, tokens = lm
    vectors, info = oam.learn_mib(rt, tokens, None, SETTINGS)
    ref, ref_steps = reference_oa(model, tokens, SETTINGS)
    assert info["steps"] == ref_steps
    ours = _ours_by_component(rt, vectors)
    init = _ours_by_component(rt, oam.mean_init(rt, tokens, SETTINGS))
    for n in ref:
        assert torch.allclose(ours[n].reshape(ref[n].shape), ref[n], rtol=1e-4, atol=1e-4), n
        assert not torch.allclose(ours[n], init[n], atol=1e-3)  # it trained
    loaded = oam.loaded_vectors(rt, vectors)
    want = reference_load(model, rt.graph, ref)
    assert torch.allclose(loaded, want, rtol=1e-4, atol=1e-4)
    g = rt.graph
    assert loaded[g.forward_index("a0.h1")].abs().sum() == 0 and loaded[g.forward_index("a0.h0")].abs().sum() > 0
    # the ablated input node is the vector plus the positions (the reference replaces hook_embed only)
    abl = oam.ablated_mib(rt, vectors, tokens.shape[1])
    assert torch.allclose(abl[0, 0], vectors[0] + model.pos_embed(tokens[:1])[0], atol=1e-6)


def test_the_next_token_loss_applies_only_where_outputs_are_the_input_vocabulary():
    root = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
    ioi = json.loads((root / "ioi" / "v1.1.0" / "meta.json").read_text())
    assert oam.objective_for(ioi)[0] == "next-token"
    case3 = json.loads(max((root / "case-3").glob("v*/meta.json")).read_text())
    kind, why = oam.objective_for(case3)
    assert kind == "task" and "cannot apply to a classifier" in why


def test_discover_with_mib_optimal_ablation_says_what_it_did(lm):
    from cbench.discovery import discover
    from cbench.tasks.data import TaskData

    _model, rt, tokens = lm
    valid = torch.ones_like(tokens, dtype=torch.bool)
    valid[:, 0] = False
    data = TaskData(tokens, random_tokens(12, 6, 9, seed=6), None, valid, "categorical")
    res = discover(rt, data, "nap", {"protocol": "mib", "ablation": "optimal"}, progress=False)
    note = res.extra["optimal_ablation"]
    assert note.startswith("optimal ablation as MIB's oa.py: MIB's next-token cross-entropy") and "head 0" in note
    plain = discover(rt, data, "nap", {"protocol": "mib"}, progress=False)
    assert "optimal_ablation" not in plain.extra and (res.scores != plain.scores).any()
