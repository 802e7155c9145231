"""The mask-learning pass (cbench.runtime.mask_training) against the masked pass it stands in for:
the same outputs and the same mask gradients to float32 rounding, on the model shapes the
methods meet (layer norms or none, MLPs or none, parallel attention and MLP, rotary positions,
one ablated row per pair or one for every pair, a minibatch of the pairs or all of them)."""

from __future__ import annotations

import pytest
import torch

from circuit_models import random_model, random_tokens

from cbench.artifacts.transformer_lens_adapter import build_model
from cbench.runtime import CircuitRuntime
from cbench.runtime.mask_training import EdgeMaskTraining, supported

MODELS = {
    "no norm": dict(n_layers=2, n_heads=2, d_model=16, d_head=4, seed=5),
    "LN": dict(n_layers=2, n_heads=3, d_model=12, d_head=4, ln="LN", seed=6, weight_scale=2.0),
    "LNPre, attention only": dict(n_layers=3, n_heads=2, d_model=8, d_head=4, ln="LNPre", attn_only=True, seed=7),
    "parallel": dict(n_layers=2, n_heads=2, d_model=8, d_head=4, ln="LN", parallel=True, seed=8),
    "d_head 1": dict(n_layers=2, n_heads=4, d_model=4, d_head=1, seed=9),
}


def _rotary_model():
    cfg = dict(n_layers=2, n_heads=2, d_model=16, d_head=8, d_mlp=32, n_ctx=8, d_vocab=9, d_vocab_out=6,
               act_fn="gelu", normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8,
               seed=3, dtype="float32")
    return build_model(cfg)


def _both(rt, tokens, ablated, rows, masks):
    """(outputs, mask gradient) of the lean pass and of ``rt.run`` under the same masks."""
    lean = EdgeMaskTraining(rt, tokens, ablated)
    got = []
    for kind in ("lean", "masked"):
        a = masks.clone().requires_grad_(True)
        with torch.enable_grad():
            if kind == "lean":
                out = lean.run(rows, a)
            else:
                tok = tokens if rows is None else tokens[rows]
                abl = ablated if rows is None or ablated.shape[1] == 1 else ablated[:, rows]
                out = rt.run(tok, edge_mask=a, ablated=abl).output
            (out.pow(2).mean() + out.mean()).backward()
        got.append((out.detach(), a.grad))
    return got


def _close(a, b):
    scale = max(1.0, float(b.abs().max()))
    assert (a - b).abs().max() <= 2e-5 * scale, float((a - b).abs().max())


@pytest.mark.parametrize("name", [*MODELS, "rotary"])
@pytest.mark.parametrize("ablation", ["resample", "mean"])
def test_the_lean_pass_is_the_masked_pass(name, ablation):
    model = _rotary_model() if name == "rotary" else random_model(**MODELS[name])
    rt = CircuitRuntime(model)
    base, source = random_tokens(12, 6, seed=1), random_tokens(12, 6, seed=2)
    ablated = rt.ablated_outputs(base, source, ablation)  # resample: one row per pair; mean: one row
    assert supported(rt, base, ablated)
    gen = torch.Generator().manual_seed(4)
    for rows in (torch.tensor([7, 2, 9, 0, 11]), None):
        B = 12 if rows is None else rows.shape[0]
        masks = torch.rand(B, rt.n_edges, generator=gen)
        masks[masks < 0.3] = 0.0  # some edges ablated outright, as UGS draws them
        (out, grad), (want, want_grad) = _both(rt, base, ablated, rows, masks)
        _close(out, want)
        _close(grad, want_grad)
        assert want_grad.abs().max() > 0


def test_models_and_runs_the_lean_pass_does_not_take(monkeypatch):
    model = random_model(**MODELS["LN"])
    base, source = random_tokens(12, 6, seed=1), random_tokens(12, 6, seed=2)
    rt = CircuitRuntime(model)
    ablated = rt.ablated_outputs(base, source)
    assert supported(rt, base, ablated)
    assert not supported(CircuitRuntime(model, live_weights=True), base, ablated)
    # (21 destinations + 9 nodes) x 12 pairs x 6 positions x 12 floats of 4 bytes: 104 kB
    monkeypatch.setenv("CBENCH_MEMORY_MB", "0.05")
    assert not supported(rt, base, ablated)
    assert supported(rt, base, rt.ablated_outputs(base, source, "mean"))  # one ablated row: 9 kB
