"""The stress tier's floor share on the logits (cbench.verify.floor_share): an edge outside the
circuit counts when its ablation alone moves some logit by at least 64 eps(float32) x max |clean
logit|. A planted edge that moves a logit by about 1e-4 counts (the legacy KL cutoff, relative to
the largest KL, misses it); edges with an exact effect of 0 do not, each with its reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cbench.runtime import CircuitRuntime
from cbench.scoring.resolution import resolution_of
from cbench.verify.edge_patching import single_edge_outputs
from cbench.verify.floor_share import LOGIT_RESOLUTION_FACTOR, floor_share, logit_resolution

V = 5  # tokens; residual dims 0..4 the token, 5 the floor channel (read weakly), 6 and 7 nothing reads
FLOOR_GAIN = 1e-4


def _planted_model():
    """Two layers. Layer 0: two heads with fixed (uniform) attention: h0 writes the mean token id
    into the floor channel, which the logits read with gain 1e-4; h1 writes it into a dimension
    nothing reads. Layer 1: h0's query reads the token and its key reads the floor channel, which
    is the same at every position (h0 of layer 0 attends uniformly), so its scores move by one
    number per query row and its attention cannot move; it writes where nothing reads. The input's
    direct edge gives the answer with logit gain 4."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=2, d_model=V + 3, n_ctx=4, d_head=1, n_heads=2, d_vocab=V,
                                  act_fn="relu", attn_only=True, normalization_type=None,
                                  attention_dir="bidirectional", seed=0)
    model = HookedTransformer(cfg)
    token_id = torch.arange(V, dtype=torch.float32) / (V - 1)  # in [0, 1]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[:, :V] = torch.eye(V)
        attn = model.blocks[0].attn
        for h, dim in ((0, V), (1, V + 1)):
            attn.W_V[h, :V, 0] = token_id
            attn.W_O[h, 0, dim] = 1.0
        late = model.blocks[1].attn
        late.W_Q[0, :V, 0] = 4.0 * token_id
        late.W_K[0, V, 0] = 4.0
        late.W_V[0, :V, 0] = token_id
        late.W_O[0, 0, V + 2] = 1.0
        model.unembed.W_U[:V, :V] = 4.0 * torch.eye(V)
        model.unembed.W_U[V, 0] = FLOOR_GAIN
    return model.eval()


def _measure():
    rt = CircuitRuntime(_planted_model())
    g = torch.Generator().manual_seed(0)
    base = torch.randint(0, V, (64, 4), generator=g)
    source = torch.randint(0, V, (64, 4), generator=g)
    acts = rt.node_outputs(base)
    ablated = rt.ablated_outputs(base, source, "resample")
    clean = rt.clean(base)
    valid = torch.ones(clean.shape[:2], dtype=torch.bool)
    edges = [e.name for e in rt.graph.edges]
    return rt, acts, ablated, clean, valid, edges, floor_share(rt, acts, ablated, clean, valid, edges)


def test_an_edge_moving_a_logit_by_1e_4_counts_and_exact_zeros_do_not():
    rt, acts, ablated, clean, valid, edges, fs = _measure()
    change = dict(zip(fs.edges, fs.logit_change.tolist()))
    res = logit_resolution(clean, valid)
    assert res == pytest.approx(LOGIT_RESOLUTION_FACTOR * np.finfo(np.float32).eps * 4.0, rel=1e-4)
    # the floor head's edges move a logit by about 1e-4, above the resolution (about 3e-5): they count
    for e in ("input->a0.h0<v>", "a0.h0->logits"):
        assert 3e-5 < change[e] < 3e-4 and change[e] >= res, (e, change[e])
        assert e not in fs.reasons
    assert change["input->logits"] > 1.0 and "input->logits" not in fs.reasons
    # exact zeros do not count, each with its reason
    want = {"input->a0.h0<q>": "attention_fixed", "input->a0.h0<k>": "attention_fixed",
            "input->a0.h1<v>": "downstream_below_resolution", "a0.h1->logits": "destination_ignores",
            "a0.h0->a1.h0<k>": "key_change_uniform", "input->a1.h0<q>": "attention_fixed",
            "input->a1.h0<k>": "attention_fixed", "a0.h0->a1.h1<v>": "destination_ignores",
            "a1.h0->logits": "destination_ignores"}
    for e, why in want.items():
        assert change[e] == 0.0 and fs.reasons[e] == why, (e, change[e], fs.reasons.get(e))
    # every edge is either counted or given a reason, never both
    assert set(fs.reasons) == {e for e, c in change.items() if c < res}
    assert all(c == 0.0 for e, c in change.items() if e in fs.reasons)
    assert fs.share == pytest.approx(3 / len(edges))
    assert fs.by_kind()["v"][0] == 1 and fs.by_kind()["logits"][0] == 2 and fs.by_kind()["k"][0] == 0
    assert sum(fs.reason_counts().values()) == len(edges) - 3
    assert f"3 of {len(edges)} outside edges" in fs.detail() and "key_change_uniform" in fs.detail()


def test_the_legacy_kl_cutoff_misses_the_1e_4_edge():
    """The gate's KL measure, cut at 64 eps x the largest KL (the input's direct edge), puts the
    planted floor edge under the cutoff although its logit change is resolvable: why the share is
    measured on the logits."""
    rt, acts, ablated, clean, valid, edges, fs = _measure()
    lp = torch.log_softmax(clean, -1)
    kl = {}
    for rows, out in single_edge_outputs(rt, acts, ablated, [rt.graph.edge_index(e) for e in edges]):
        lq = torch.log_softmax(out, -1)
        for i, r in enumerate(rows.tolist()):
            kl[edges[r]] = float((lp.exp() * (lp - lq[i])).sum(-1).mean())
    cutoff = resolution_of(list(kl.values()), "float32")
    assert kl["input->a0.h0<v>"] < cutoff  # the legacy gate would not count it
    assert "input->a0.h0<v>" not in fs.reasons  # the logit measure does
