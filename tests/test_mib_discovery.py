"""``--protocol mib`` discovery against independent reimplementations of MIB's reference code
(EAP-IG branch MIB: ``attribute_node.py`` for NAP / NAP-IG-inputs, ``attribute.py`` for IFR;
``alestolfo/optimalablation`` for UGS), written here with TransformerLens hooks the way that code
places them, on a small random model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from cbench.artifacts import transformer_lens_adapter as tla
from cbench.discovery import discover
from cbench.discovery.base import prepare
from cbench.graph.graph import Graph
from cbench.runtime import CircuitRuntime
from cbench.tasks.data import TaskData
from circuit_models import random_model, random_tokens


def _data(n=8, p=5, d_vocab=9, seed=40):
    base, source = random_tokens(n, p, d_vocab, seed=seed + 1), random_tokens(n, p, d_vocab, seed=seed + 2)
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, "categorical")


@pytest.fixture(scope="module")
def setup():
    model = random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=11, weight_scale=2.0)
    tla.enable_edge_hooks(model)
    return model, CircuitRuntime(model), _data()


def _mib_hooks(g: Graph):
    """MIB's ``make_hooks_and_matrices``: (node, activation hook, gradient hook, head index)."""
    out = [("input", "hook_embed", "hook_embed", None)]
    for layer in range(g.n_layers):
        for h in range(g.n_heads):
            out.append((f"a{layer}.h{h}", f"blocks.{layer}.attn.hook_result", f"blocks.{layer}.attn.hook_result", h))
        out.append((f"m{layer}", f"blocks.{layer}.hook_mlp_out", f"blocks.{layer}.hook_mlp_in", None))
    return out


def _cache(model, tokens, names):
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return cache


def mib_nap(model, base, source, loss, steps=None) -> dict[str, torch.Tensor]:
    """MIB's node attribution at neuron level, one batch: (corrupted - clean) activation at each
    node's output hook times the gradient of the batch-mean loss at its gradient hook, summed over
    batch and positions, divided by the item count (and by Z for NAP-IG-inputs, whose runs
    interpolate hook_embed from corrupted to clean at k / Z, k = 1 .. Z)."""
    g = Graph.from_config(model.cfg)
    hooks = _mib_hooks(g)
    act_names = {a for _, a, _, _ in hooks}
    clean, corrupted = _cache(model, base, act_names), _cache(model, source, act_names)
    grad_names = {gr for _, _, gr, _ in hooks}
    grads: dict[str, torch.Tensor] = {}
    alphas = [1.0] if steps is None else [k / steps for k in range(1, steps + 1)]
    for alpha in alphas:
        kept = {}

        def keep(x, hook, alpha=alpha, kept=kept):
            if hook.name == "hook_embed" and steps is not None:
                x = corrupted["hook_embed"] + alpha * (clean["hook_embed"] - corrupted["hook_embed"]) + x * 0
            x = x if x.requires_grad else x.detach().requires_grad_(True)
            x.retain_grad()
            kept[hook.name] = x
            return x

        out = model.run_with_hooks(base, fwd_hooks=[(n, keep) for n in grad_names])
        loss(out).backward()
        for n in grad_names:
            grads[n] = grads.get(n, 0) + kept[n].grad.detach()
        model.zero_grad(set_to_none=True)
    N = base.shape[0]
    scores = {}
    for node, act, gr, h in hooks:
        d = corrupted[act] - clean[act]
        gg = grads[gr]
        if h is not None:
            d, gg = d[:, :, h], gg[:, :, h]
        scores[node] = (d * gg).sum((0, 1)) / N / len(alphas)
    return scores


@pytest.mark.parametrize("method,steps", [("nap", None), ("nap-ig", 3)])
def test_nap_mib_equals_the_reference_code(setup, method, steps):
    model, rt, data = setup
    hp = {"protocol": "mib"} if steps is None else {"protocol": "mib", "steps": steps}
    res = discover(rt, data, method, hp, progress=False)
    loss = prepare(rt, data, method).metric
    ref = mib_nap(model, data.base, data.source, loss, steps)
    want = np.stack([ref[n].numpy() for n in rt.graph.forward_nodes]).astype(np.float64)
    ours = np.array(res.extra["neuron_scores"]) / data.n_examples  # MIB divides by the items once more
    assert np.abs(want).max() > 0
    assert np.allclose(ours, want, rtol=1e-4, atol=1e-6 * np.abs(want).max()), np.abs(ours - want).max()
    assert "mib" in res.extra["protocol"]
    # the paper's NAP (cbench) differs exactly at the MLPs
    paper = np.array(discover(rt, data, method, {} if steps is None else {"steps": steps},
                              progress=False).extra["neuron_scores"]) / data.n_examples
    mlp = [i for i, n in enumerate(rt.graph.forward_nodes) if n.startswith("m")]
    heads = [i for i, n in enumerate(rt.graph.forward_nodes) if n.startswith("a")]
    assert not np.allclose(paper[mlp], want[mlp], rtol=1e-3)
    if steps is None:
        assert np.allclose(paper[heads], want[heads], rtol=1e-4, atol=1e-6 * np.abs(want).max())


def mib_ifr(model, tokens) -> dict[str, float]:
    """MIB's IFR, one batch, no padding: per position, the clamped L1 proximity of every earlier
    node's output (input = hook_embed) to the destination's input hook, normalized over the sources;
    averaged over each prompt's positions (BOS included), then over prompts."""
    g = Graph.from_config(model.cfg)
    names = {"hook_embed", tla.final_resid_hook(g.n_layers)}
    for layer in range(g.n_layers):
        names |= {f"blocks.{layer}.attn.hook_result", f"blocks.{layer}.hook_mlp_out", f"blocks.{layer}.hook_mlp_in"}
        names |= {f"blocks.{layer}.hook_{q}_input" for q in "qkv"}
    c = _cache(model, tokens, names)
    out = {"input": c["hook_embed"]}
    for layer in range(g.n_layers):
        for h in range(g.n_heads):
            out[f"a{layer}.h{h}"] = c[f"blocks.{layer}.attn.hook_result"][:, :, h]
        out[f"m{layer}"] = c[f"blocks.{layer}.hook_mlp_out"]
    scores = {}
    for node, qkv in g.backward_slots:
        n = g.node(node)
        if n.kind == "logits":
            a_v = c[tla.final_resid_hook(g.n_layers)]
        elif n.kind == "mlp":
            a_v = c[f"blocks.{n.layer}.hook_mlp_in"]
        else:
            a_v = c[f"blocks.{n.layer}.hook_{qkv}_input"][:, :, n.head]
        edges = [e for e in g.edges if (e.dst, e.qkv) == (node, qkv)]
        prox = torch.stack([(a_v.abs().sum(-1) - (out[e.src] - a_v).abs().sum(-1)).clamp(min=0) for e in edges])
        imp = prox / prox.sum(0, keepdim=True)
        per_prompt = imp.mean(2)  # [S, B]: mean over positions
        for e, v in zip(edges, per_prompt.mean(1)):
            scores[e.name] = float(v)
    return scores


def test_ifr_mib_equals_the_reference_code(setup):
    model, rt, data = setup
    res = discover(rt, data, "ifr", {"protocol": "mib", "batch_size": 3}, progress=False)
    ref = mib_ifr(model, data.base)
    want = np.array([ref[e.name] for e in rt.graph.edges])
    assert np.allclose(res.scores, want, rtol=1e-5, atol=1e-6), np.abs(res.scores - want).max()
    paper = discover(rt, data, "ifr", {}, progress=False).scores
    assert np.abs(paper - want).max() > 1e-3  # a different quantity: scored positions only, input with positions


# ---------------------------------------------------------------------------- UGS (MIB's code)
def mib_unif_sample(logits: torch.Tensor, unif: torch.Tensor) -> torch.Tensor:
    """MIB's ``EdgeMaskUnifSampler`` draw with its gradient path, from the logits (``[E]``) and one
    uniform per row and edge (``[R, E]``): ``sample_modified_unif`` (window w = θ(1-θ), detached;
    θ enters as w·θ - (w-1)·θ.detach(); value 1 - clamp((u - θ') / w + 1/2, 0, 1)), then
    ``MaskSampler.sample_mask``'s ``normalize_empirical_mask`` re-weighting: the gradient (not the
    value) multiplied by R / (rows whose value is strictly inside (1e-3, 1 - 1e-3)), 0 where no
    row is."""
    p = logits.sigmoid()
    w = (p * (1 - p)).detach()
    p = w * p - (w - 1) * p.detach()
    s = 1 - ((unif - p) / w + 0.5).clamp(0, 1)
    n = ((s < 1 - 1e-3) * (s > 1e-3)).sum(dim=0)
    g = torch.where(n < 1, 0, unif.shape[0] / n)
    return g * s + (1 - g) * s.detach()


def unif_of_draws(theta: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The reference's single uniform that gives the mask cbench's two draws give: sampled (u < w)
    with value v at θ + w/2 - v·w; 1 (w <= u < θ + w/2) at u - w; else 0 at u."""
    w = theta * (1 - theta)
    return torch.where(u < w, theta + w / 2 - v * w, torch.where(u < theta + w / 2, u - w, u))


def mib_ugs(model, base, source, metric, steps: int, seed: int) -> torch.Tensor:
    """MIB's UGS objective and schedule (alestolfo/optimalablation edge_pruning_unif_mib.py),
    full batch of the given pairs, each drawn 12 times: per row, the mask drawn by MIB's sampler
    (:func:`mib_unif_sample`; its uniforms from cbench's u, v draws, :func:`unif_of_draws`),
    filtered to input -> logits paths of its non-zero entries (the filter detached, counts taken
    before it); lambda 1e-3 x sum(theta) plus 2e-4 x the head node term; every gradient by
    autograd into the logits; per-group clipping to norm 5; AdamW(1e-2, betas .9/.995)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from hook_reference import hooked_patched_run, node_output_caches

    g = Graph.from_config(model.cfg)
    S, E, L, H = 12, g.n_edges, g.n_layers, g.n_heads
    tokens = base.repeat(S, 1)
    R = tokens.shape[0]
    ablated = {k: v.repeat(S, 1, 1) for k, v in node_output_caches(model, source).items()}
    logits = torch.full((E,), 1.0, requires_grad=True)
    opt = torch.optim.AdamW([logits], lr=1e-2, betas=(0.9, 0.995), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    heads = [n.name for n in g.nodes if n.kind == "head"]
    touch = torch.tensor([[float(h in (e.src, e.dst)) for e in g.edges] for h in heads])
    groups: dict = {}
    for e in g.edges:
        groups.setdefault((e.src.startswith("a"), e.dst.startswith("a")), []).append(e.index)
    for _ in range(steps):
        theta = torch.sigmoid(logits.detach())
        u, v = torch.rand(R, E, generator=gen), torch.rand(R, E, generator=gen)
        sample = mib_unif_sample(logits, unif_of_draws(theta, u, v))
        kept = torch.stack([torch.as_tensor(g.prune_dangling((sample[r] > 0).detach().numpy())) for r in range(R)])
        sample = sample * kept.float()
        weights = {e.name: sample[:, e.index].reshape(R, 1, 1) for e in g.edges}
        p = logits.sigmoid()
        node = (torch.tanh(2 * (touch @ p) / (L * H)) * (L * H) / 2).sum()
        opt.zero_grad()
        (metric(hooked_patched_run(model, tokens, ablated, weights)) + 1e-3 * p.sum() + 2e-4 * node).backward()
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for idx in groups.values():
                norm = logits.grad[idx].norm()
                if norm > 5.0:
                    logits.grad[idx] = logits.grad[idx] * (5.0 / (norm + 1e-6))
        opt.step()
    return torch.sigmoid(logits.detach())


def test_the_reference_sampler_draws_what_cbench_draws():
    """The uniform mapping reproduces cbench's masks, and the sampler's gradient is w · R / n_e
    per sampled entry (the factor the parity test below depends on)."""
    from cbench.discovery.ugs import sample_alpha

    logits = torch.linspace(-3, 3, 40).requires_grad_(True)
    theta = logits.detach().sigmoid()
    alpha, sampled = sample_alpha(theta, 60, torch.Generator().manual_seed(5))
    g2 = torch.Generator().manual_seed(5)
    u, v = torch.rand(60, 40, generator=g2), torch.rand(60, 40, generator=g2)
    s = mib_unif_sample(logits, unif_of_draws(theta, u, v))
    assert torch.allclose(s.detach(), alpha, atol=1e-6) and sampled.any() and (~sampled).any()
    s.sum().backward()
    n = ((alpha > 1e-3) & (alpha < 1 - 1e-3)).sum(0)
    want = torch.where(n > 0, theta * (1 - theta) * 60 / n.clamp(min=1) * sampled.sum(0), torch.zeros(()))
    assert torch.allclose(logits.grad, want, rtol=1e-5, atol=1e-7)
    assert (60 / n[n > 0] > 2).all()  # the factor is far from 1: leaving it out changes the gradient


def test_ugs_mib_equals_the_reference_code(setup):
    from cbench.tasks.metrics import Metric

    model, rt, data = setup
    small = TaskData(data.base[:5], data.source[:5], None, data.valid[:5], "categorical")  # one batch of 5
    res = discover(rt, small, "ugs", {"protocol": "mib", "steps": 3, "seed": 4}, progress=False)
    m = prepare(rt, small, "ugs").metric
    rep = Metric(m.name, m.reference.repeat(12, *([1] * (m.reference.dim() - 1))), m.valid.repeat(12, 1))
    ref = mib_ugs(model, small.base, small.source, rep, 3, 4).numpy()
    assert np.abs(res.scores - 1 / (1 + np.exp(-1.0))).max() > 1e-3  # it moved from the initial logit 1
    assert np.allclose(res.scores, ref, rtol=0, atol=1e-5), np.abs(res.scores - ref).max()
    assert res.hyperparameters["lambda_reg"] == 1e-3 and "mib" in res.extra["protocol"]


def test_dangling_filter_is_prune_dangling_per_row():
    from cbench.discovery.ugs import dangling_filter

    g = Graph(3, 2)
    keep = torch.rand(20, g.n_edges, generator=torch.Generator().manual_seed(0)) < 0.3
    got = dangling_filter(g, keep)
    want = torch.stack([torch.as_tensor(g.prune_dangling(k.numpy())) for k in keep])
    assert torch.equal(got, want) and got.any()


def test_ugs_default_penalty_scales_with_the_graph():
    from cbench.discovery.ugs import default_lambda

    assert default_lambda(110) == pytest.approx(0.11) and default_lambda(50) == 0.1
    assert default_lambda(32491) == pytest.approx(32.491)  # GPT-2 small: MIB's 1e-3 per edge


def test_protocol_mib_on_the_command_line():
    from cbench.scoring.bench import bench_hyperparameters
    from cli_inprocess import assert_one_clean_error, run_main

    assert_one_clean_error(run_main(["discover", "case-3", "-m", "eap", "--protocol", "mib"]), None,
                           "eap runs the same under MIB's code")
    assert_one_clean_error(run_main(["discover", "case-3", "-m", "nap", "--protocol", "mib", "-p", "protocol=cbench"]),
                           None, "disagree")
    assert bench_hyperparameters("nap", "3", "mib") == {"protocol": "mib"}
    assert bench_hyperparameters("eap", "3", "mib") == {} and bench_hyperparameters("nap", "3") == {}
