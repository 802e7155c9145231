"""The floor gate's fast pass (cbench.verify.edge_patching): each edge ablated alone, run as a
forward from its destination on, gives the same outputs and the same exact patching scores as the
edge-masked pass it replaces, on a stress model and on random models with layer norms, a
parallel MLP and causal attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cbench.errors import UsageError
from cbench.runtime import CircuitRuntime
from cbench.verify.edge_patching import edges_per_pass, single_edge_outputs


def _random_model(parallel: bool, seed: int = 0):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=3, d_model=16, n_ctx=6, d_head=4, n_heads=3, d_vocab=7, d_mlp=12,
                                  act_fn="gelu", normalization_type="LN", attention_dir="causal",
                                  parallel_attn_mlp=parallel, seed=seed)
    model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # every weight and bias non-zero, so no term can be dropped unseen
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.dim() == 1 and p.shape[0] == 16 else 0.0))
    return model.eval()


def _masked_single_edge_outputs(rt, base, ablated, edges):
    masks = torch.ones(len(edges), rt.n_edges)
    masks[torch.arange(len(edges)), torch.as_tensor(edges)] = 0.0
    return rt.run_masks(base, masks, ablated=ablated)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("budget", [None, 1.0])  # 1 byte: one edge per pass
def test_fast_single_edge_outputs_equal_the_masked_pass(parallel, budget):
    rt = CircuitRuntime(_random_model(parallel))
    g = torch.Generator().manual_seed(1)
    base = torch.randint(0, 7, (9, 6), generator=g)
    source = torch.randint(0, 7, (9, 6), generator=g)
    acts = rt.node_outputs(base)
    ablated = rt.ablated_outputs(base, source, "resample")
    edges = list(range(rt.n_edges))
    want = _masked_single_edge_outputs(rt, base, ablated, edges)
    got = torch.zeros_like(want)
    seen = []
    for rows, out in single_edge_outputs(rt, acts, ablated, edges, budget=budget):
        got[torch.as_tensor(rows)] = out
        seen += rows.tolist()
    assert sorted(seen) == edges  # every edge once
    clean = rt.clean(base)
    moved = (want - clean).abs().amax(dim=(1, 2, 3))
    assert (moved > 1e-3).float().mean() > 0.9  # the edges do change the outputs: the comparison can fail
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_edges_per_pass_follows_the_budget():
    rt = CircuitRuntime(_random_model(False))
    assert edges_per_pass(rt, 1000, 6, budget=1.0) == 1
    big = edges_per_pass(rt, 10, 6, budget=2.0**30)
    assert big > edges_per_pass(rt, 1000, 6, budget=2.0**30) >= 1


def test_floor_scores_equal_the_masked_pass_on_a_stress_model():
    """The floor gate's scores (exact patching, KL from the clean model) of every edge of a
    three-layer deep design, by the fast pass and by the masked pass, on the same pairs."""
    pytest.importorskip("cbench_builders")
    from cbench_builders.stress.build import meta_of
    from cbench_builders.stress.deep import _chains

    from cbench.tasks.data import sample_pairs
    from cbench.verify.mechanisms import _Probe

    d = _chains("stress-deep-small", 3, [1, 2, 3], [1.0, 0.7, 0.45], seed=19)
    model = d.kit.model()
    p = _Probe(model, sample_pairs(meta_of(d), 60, seed=5))
    names = [e.name for e in p.rt.graph.edges]
    slow = p.kl([[e] for e in names])
    fast = p.single_kl(names)
    assert (slow > 1e-6).sum() >= 20 and slow.max() > 0.1  # a floor and a circuit, not all zeros
    np.testing.assert_allclose(fast, slow, rtol=1e-4, atol=1e-7)
    # a name the graph does not have: the masked pass's one clear error
    with pytest.raises(UsageError, match="edges the model does not have: a1.h0->a2.h9"):
        p.single_kl([names[5], "a1.h0->a2.h9"])
