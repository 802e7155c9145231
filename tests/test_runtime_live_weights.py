"""CircuitRuntime(model, live_weights=True): masked runs read the model's parameters at every
call, so gradients reach the model (edge-strict training) and optimizer steps show at once."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from circuit_models import random_model, random_tokens  # noqa: E402
from hook_reference import hooked_patched_run, node_output_caches  # noqa: E402

from cbench.runtime import CircuitRuntime  # noqa: E402

CONFIGS = {
    "mlp-causal": dict(attn_only=False, causal=True),
    "attn-only-bidirectional-3x4": dict(attn_only=True, causal=False, n_layers=3, n_heads=4),
    "mlp-layernorm-3x2": dict(attn_only=False, causal=True, ln="LN", n_layers=3, n_heads=2),
    "parallel-attn-mlp": dict(attn_only=False, causal=True, parallel=True),
}


def loss_fn(out: torch.Tensor) -> torch.Tensor:
    return out.logsumexp(-1).mean() + 0.1 * out.pow(2).mean()


def param_grads(model, loss: torch.Tensor) -> dict[str, torch.Tensor | None]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def setup(request):
    model = random_model(seed=7, **CONFIGS[request.param])
    base, source = random_tokens(6, 7, seed=1), random_tokens(6, 7, seed=2)
    return model, base, source


def test_live_outputs_equal_the_cached_ones(setup):
    model, base, source = setup
    cached, live = CircuitRuntime(model), CircuitRuntime(model, live_weights=True)
    assert live.live_weights and not cached.live_weights
    gen = torch.Generator().manual_seed(3)
    masks = [torch.rand(cached.n_edges, generator=gen), (torch.rand(cached.n_edges, generator=gen) > 0.5).float(),
             torch.rand(3, cached.n_edges, generator=gen)]
    for mask in masks:
        for ablation in ("resample", "mean", "zero"):
            a = cached.run(base, source, edge_mask=mask, ablation=ablation, reference=source).output
            b = live.run(base, source, edge_mask=mask, ablation=ablation, reference=source).output
            assert (a - cached.clean(base)).abs().max() > 1e-3  # the mask does something
            assert torch.allclose(a, b, atol=1e-6, rtol=0)
    with torch.no_grad():
        assert torch.allclose(cached.run_masks(base, masks[2], source=source),
                              live.run_masks(base, masks[2], source=source), atol=1e-6, rtol=0)
        assert torch.allclose(cached.node_outputs(base), live.node_outputs(base), atol=1e-6, rtol=0)
        acts = cached.node_outputs(base)
        assert torch.allclose(cached.destination_inputs(acts), live.destination_inputs(acts), atol=1e-6, rtol=0)
        assert torch.allclose(cached.unembed_fn()(acts[0]), live.unembed_fn()(acts[0]), atol=1e-6, rtol=0)
    ga, va = cached.input_gradients(base, loss_fn, source=source, node_mask=torch.full((cached.n_forward,), 0.5))
    gb, vb = live.input_gradients(base, loss_fn, source=source, node_mask=torch.full((cached.n_forward,), 0.5))
    assert abs(va - vb) < 1e-6 and torch.allclose(ga, gb, atol=1e-6, rtol=0)


def test_all_ones_masked_run_gives_the_models_parameter_gradients(setup):
    model, base, _source = setup
    live = CircuitRuntime(model, live_weights=True)
    ref = param_grads(model, loss_fn(model(base)))
    # a differentiable all-ones mask takes the edge-masked (einsum) pass, not the exact one
    ones = torch.ones(live.n_edges, requires_grad=True)
    got = param_grads(model, loss_fn(live.run(base, base, edge_mask=ones).output))
    assert ones.grad is not None
    assert set(ref) == set(got)
    for name in ref:
        assert (ref[name] is None) == (got[name] is None), name
        if ref[name] is not None:
            assert torch.allclose(got[name], ref[name], atol=1e-5, rtol=0), name
    assert any("b_O" in name and ref[name].abs().max() > 1e-3 for name in ref)
    # the cached runtime's masked pass reads b_O from its cache: no gradient reaches it
    cached = CircuitRuntime(model)
    cached_grads = param_grads(model, loss_fn(cached.run(base, base, edge_mask=ones).output))
    assert all(cached_grads[name] is None for name in ref if name.endswith("b_O"))


def test_masked_parameter_gradients_match_hook_patching(setup):
    model, base, source = setup
    live = CircuitRuntime(model, live_weights=True)
    mask = (torch.rand(live.n_edges, generator=torch.Generator().manual_seed(5)) > 0.4).float()
    got = param_grads(model, loss_fn(live.run(base, source, edge_mask=mask).output))
    abl = node_output_caches(model, source)  # detached, as the runtime's ablated activations
    weights = {e.name: float(mask[e.index]) for e in live.graph.edges}
    ref = param_grads(model, loss_fn(hooked_patched_run(model, base, abl, weights)))
    for name in ref:
        if ref[name] is None:
            assert got[name] is None or got[name].abs().max() == 0, name
        else:
            assert torch.allclose(got[name], ref[name], atol=1e-5, rtol=0), name


def test_optimizer_steps_show_in_live_runs_not_in_cached_ones():
    model = random_model(seed=11, attn_only=False, causal=True, ln="LN")
    base, source = random_tokens(4, 6, seed=1), random_tokens(4, 6, seed=2)
    mask = (torch.rand(CircuitRuntime(model).n_edges, generator=torch.Generator().manual_seed(2)) > 0.5).float()
    cached, live = CircuitRuntime(model), CircuitRuntime(model, live_weights=True)

    def outputs(rt, ablation="resample"):
        with torch.no_grad():
            return rt.run(base, source, edge_mask=mask, ablation=ablation).output

    before_live, before_zero = outputs(live), outputs(cached, "zero")
    # a step on b_O only: zero ablation reads b_O nowhere but in the bias sums
    b_os = [blk.attn.b_O for blk in model.blocks]
    opt = torch.optim.SGD(b_os, lr=0.5)
    opt.zero_grad()
    loss_fn(live.run(base, source, edge_mask=mask).output).backward()
    opt.step()
    assert torch.equal(outputs(cached, "zero"), before_zero)  # stale
    assert (outputs(live, "zero") - before_zero).abs().max() > 1e-3
    assert torch.allclose(outputs(live, "zero"), outputs(CircuitRuntime(model), "zero"), atol=1e-6, rtol=0)
    # a step on every parameter, through the live masked run
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    loss_fn(live.run(base, source, edge_mask=mask).output).backward()
    opt.step()
    fresh = outputs(CircuitRuntime(copy.deepcopy(model)))
    assert (outputs(live) - before_live).abs().max() > 1e-3
    assert torch.allclose(outputs(live), fresh, atol=1e-6, rtol=0)
    assert (outputs(cached) - fresh).abs().max() > 1e-4  # cached b_O sums and q/k/v are stale
    cached.refresh_weights()
    assert torch.equal(outputs(cached), fresh)
