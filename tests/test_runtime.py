"""The edge-masked runtime against TransformerLens hook-based patching (the oracle)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from circuit_models import random_model, random_tokens  # noqa: E402
from hook_reference import hooked_patched_run, node_output_caches  # noqa: E402

from cbench.errors import GraphError, UsageError  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402

CONFIGS = {
    "mlp-causal": dict(attn_only=False, causal=True),
    "attn-only-causal": dict(attn_only=True, causal=True),
    "mlp-bidirectional": dict(attn_only=False, causal=False),
    "attn-only-bidirectional-3x4": dict(attn_only=True, causal=False, n_layers=3, n_heads=4),
    "mlp-layernorm-3x2": dict(attn_only=False, causal=True, ln="LN", n_layers=3, n_heads=2),
    "parallel-attn-mlp": dict(attn_only=False, causal=True, parallel=True),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def setup(request):
    model = random_model(seed=7, **CONFIGS[request.param])
    rt = CircuitRuntime(model)
    base = random_tokens(6, 7, seed=1)
    source = random_tokens(6, 7, seed=2)
    return model, rt, base, source


def test_all_ones_mask_reproduces_the_model(setup):
    model, rt, base, source = setup
    with torch.no_grad():
        ref = model(base)
    # unpatched runs and all-ones masks follow TransformerLens's order of operations: bit-exact
    assert torch.equal(rt.clean(base), ref)
    assert torch.equal(rt.run(base, source, edge_mask=torch.ones(rt.n_edges)).output, ref)
    assert torch.equal(rt.run(base, source, node_mask=torch.ones(rt.n_forward)).output, ref)
    # a differentiable all-ones mask goes through the masked einsum: float32 summation order only
    ones = torch.ones(rt.n_edges, requires_grad=True)
    out = rt.run(base, source, edge_mask=ones).output
    scale = float(ref.abs().max())
    assert torch.allclose(out, ref, atol=1e-6 * max(1.0, scale), rtol=0)
    out.sum().backward()
    assert ones.grad is not None and ones.grad.abs().sum() > 0


@pytest.mark.parametrize("ablation", ["resample", "mean", "zero"])
def test_random_masks_match_hook_patching(setup, ablation):
    model, rt, base, source = setup
    g = rt.graph
    gen = torch.Generator().manual_seed(3)
    if ablation == "resample":
        abl = node_output_caches(model, source)
    elif ablation == "mean":
        abl = {k: v.mean(0, keepdim=True) for k, v in node_output_caches(model, source).items()}
    else:
        abl = {n: torch.zeros(1, 1, rt.d_model) for n in g.forward_nodes}
    for trial in range(2):
        mask = torch.rand(rt.n_edges, generator=gen)
        if trial == 1:
            mask = (mask > 0.5).float()
        out = rt.run(base, source, edge_mask=mask, ablation=ablation, reference=source).output
        with torch.no_grad():
            ref = hooked_patched_run(model, base, abl, {e.name: float(mask[e.index]) for e in g.edges})
        assert (ref - model(base)).abs().max() > 1e-3  # the patch does something
        assert torch.allclose(out, ref, atol=1e-5, rtol=0)


def test_per_example_masks_and_run_masks(setup):
    model, rt, base, source = setup
    gen = torch.Generator().manual_seed(5)
    masks = torch.rand(3, rt.n_edges, generator=gen)
    batched = rt.run_masks(base, masks, source=source)
    for i in range(3):
        single = rt.run(base, source, edge_mask=masks[i]).output
        assert torch.allclose(batched[i], single, atol=1e-5)
    per_example = masks[torch.arange(base.shape[0]) % 3]
    out = rt.run(base, source, edge_mask=per_example).output
    for b in range(base.shape[0]):
        single = rt.run(base[b:b + 1], source[b:b + 1], edge_mask=per_example[b]).output
        assert torch.allclose(out[b:b + 1], single, atol=1e-5)


def test_run_masks_runs_each_distinct_mask_once_and_keeps_the_order(setup, monkeypatch):
    model, rt, base, source = setup
    from cbench.runtime import masked_forward

    gen = torch.Generator().manual_seed(7)
    distinct = (torch.rand(3, rt.n_edges, generator=gen) > 0.5).float()
    masks = distinct[torch.tensor([2, 0, 2, 1, 0, 2])]  # repeated rows, not in first-seen order
    rows = []
    real = masked_forward.masked_pass
    monkeypatch.setattr(masked_forward, "masked_pass", lambda r, tok, M, *a, **k: rows.append(
        M.shape[0] if M.dim() == 3 else 1) or real(r, tok, M, *a, **k))
    out = rt.run_masks(base, masks, source=source)
    assert sum(rows) == 3  # three distinct masks, three masked rows of examples
    assert out.shape[0] == 6
    for i in range(6):
        single = rt.run(base, source, edge_mask=masks[i]).output
        assert torch.allclose(out[i], single, atol=1e-5)


def test_single_edge_masks_take_the_sparse_differences_to_the_bit(setup, monkeypatch):
    """Activation patching's batches (one edge zeroed per mask, started at a destination from the
    clean outputs before it): the masked pass adds each mask's difference from the batch's first
    row from its few non-zero terms, and computes the rows whose inputs are still equal (their
    edges lie further on) once; the outputs equal the dense update's on every row to the bit."""
    model, rt, base, source = setup
    from cbench.runtime import masked_forward

    attended = []
    real_attention = masked_forward.attention
    monkeypatch.setattr(masked_forward, "attention", lambda r, layer, x, *a, **k: attended.append(x.shape[0])
                        or real_attention(r, layer, x, *a, **k))

    with torch.no_grad():
        _clean_out, clean, ablated = rt.paired_outputs(base, source)
    order = torch.as_tensor(rt.graph.edge_backward).argsort(stable=True)
    real = masked_forward.few_differences
    saved = []
    for idx in (order[:5], order[3:11], order[-4:], torch.cat([order[:2], order[-7:]])):
        masks = torch.ones(len(idx), rt.n_edges)
        masks[torch.arange(len(idx)), idx] = 0.0
        start = int(rt.graph.edge_backward[int(idx[0])])
        kwargs = dict(ablated=ablated, chunk_size=len(idx), start_slot=start, prefix=clean)
        taken = []
        monkeypatch.setattr(masked_forward, "few_differences", lambda dm: taken.append(real(dm)) or taken[-1])
        with torch.no_grad():
            attended.clear()
            sparse = rt.run_masks(base, masks, **kwargs)
            fewer = list(attended)
            monkeypatch.setattr(masked_forward, "few_differences", lambda dm: None)
            attended.clear()
            dense = rt.run_masks(base, masks, **kwargs)
        assert any(t is not None for t in taken) and torch.equal(sparse, dense)
        assert sum(fewer) <= sum(attended) and all(rows == len(idx) * base.shape[0] for rows in attended)
        saved.append(sum(fewer) < sum(attended))
    assert any(saved)  # rows computed once for a class of equal inputs


def test_node_mask_equals_masking_outgoing_edges(setup):
    model, rt, base, source = setup
    g = rt.graph
    node = g.forward_nodes[2]
    nm = torch.ones(rt.n_forward)
    nm[2] = 0.3
    em = torch.ones(rt.n_edges)
    em[torch.as_tensor(g.edge_forward == 2)] = 0.3
    a = rt.run(base, source, node_mask=nm).output
    b = rt.run(base, source, edge_mask=em).output
    assert torch.allclose(a, b, atol=1e-6)
    c = rt.run(base, source, node_mask={node: 0.3}).output
    assert torch.allclose(a, c, atol=1e-6)
    # a node mask being trained (subnetwork probing) takes the per-head matrix product and
    # normalises the residual once: the same outputs, and its gradient is the edge mask's summed
    # over the node's outgoing edges
    nm_t = nm.clone().requires_grad_(True)
    em_t = em.clone().requires_grad_(True)
    with torch.enable_grad():
        d = rt.run(base, source, node_mask=nm_t).output
        e = rt.run(base, source, edge_mask=em_t).output
        (gn,) = torch.autograd.grad(d.square().sum(), nm_t)
        (ge,) = torch.autograd.grad(e.square().sum(), em_t)
    assert torch.allclose(d, a, atol=1e-5) and not torch.equal(d, torch.zeros_like(d))
    assert torch.allclose(gn[2], ge[torch.as_tensor(g.edge_forward == 2)].sum(), rtol=1e-4, atol=1e-4)


def test_mask_gradient_is_eap_and_matches_finite_differences():
    model = random_model(seed=11, attn_only=False, causal=True, ln="LN")
    rt = CircuitRuntime(model)
    base, source = random_tokens(4, 6, seed=1), random_tokens(4, 6, seed=2)
    torch.set_default_dtype(torch.float32)
    metric = lambda out: out.logsumexp(-1).mean()  # noqa: E731
    grad, value = rt.edge_mask_gradient(base, metric, source=source)
    mask = torch.ones(rt.n_edges, dtype=torch.float64)
    # EAP identity: d metric / d mask[e] = sum (a_src - a'_src) . d metric / d input[dst]
    grads_in, _ = rt.input_gradients(base, metric, source=source)
    diff = rt.node_outputs(base) - rt.node_outputs(source)
    assert torch.allclose(rt.scores_from_input_gradients(diff, grads_in), grad, atol=1e-5)
    # against a central finite difference on a few edges
    for e in (0, rt.n_edges // 2, rt.n_edges - 1):
        eps = 1e-2
        up, down = torch.ones(rt.n_edges), torch.ones(rt.n_edges)
        up[e], down[e] = 1 + eps, 1 - eps
        with torch.no_grad():
            fd = (metric(rt.run(base, source, edge_mask=up).output) - metric(rt.run(base, source, edge_mask=down).output)) / (2 * eps)
        assert abs(float(fd) - float(grad[e])) < 1e-3 + 1e-2 * abs(float(fd))


def test_bad_masks_and_inputs_are_one_line_errors():
    rt = CircuitRuntime(random_model(seed=1))
    base, source = random_tokens(2, 5, seed=1), random_tokens(2, 5, seed=2)
    with pytest.raises(GraphError, match=f"has {rt.n_edges} entries"):
        rt.run(base, source, edge_mask=torch.ones(rt.n_edges - 1))
    with pytest.raises(GraphError, match="node mask"):
        rt.run(base, source, node_mask=torch.ones(3))
    with pytest.raises(GraphError, match="not in this model's graph"):
        rt.run(base, source, edge_mask={"input->a9.h0<q>"})
    with pytest.raises(UsageError, match="needs source"):
        rt.run(base, None, edge_mask=torch.zeros(rt.n_edges))
    with pytest.raises(UsageError, match="token ids"):
        rt.clean(torch.full((1, 4), 99))
    with pytest.raises(UsageError, match="unknown ablation"):
        rt.run(base, source, edge_mask=torch.zeros(rt.n_edges), ablation="gaussian")


def test_edge_name_masks():
    rt = CircuitRuntime(random_model(seed=1))
    base, source = random_tokens(2, 5, seed=1), random_tokens(2, 5, seed=2)
    names = [e.name for e in rt.graph.edges[:10]]
    a = rt.run(base, source, edge_mask=set(names)).output
    b = rt.run(base, source, edge_mask=torch.as_tensor(rt.graph.mask(names))).output
    assert torch.equal(a, b)
