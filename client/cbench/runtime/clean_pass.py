"""Unpatched runs: the model's outputs bit-exact (:func:`clean`) and every node's output in one
pass with each layer's q/k/v projections fused (:func:`node_outputs`, :func:`paired_outputs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.errors import UsageError
from cbench.runtime.attention_ops import cap_scores, future_mask, rotate
from cbench.runtime.layers import add_mlp, embed, post_heads, unembed
from cbench.runtime.masks import tokens_tensor
from cbench.runtime.memory import exact_rows_per_pass
from cbench.runtime.residual_pass import forward_resid
from cbench.runtime.run_result import RunResult
from cbench.runtime.weights import project_qkv

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


@torch.no_grad()
def clean(rt: ModelState, tokens) -> torch.Tensor:
    """The unpatched model's outputs ``[B, P, d_vocab_out]`` (same numbers as the model), in
    passes of as many rows as :func:`cbench.runtime.memory.exact_rows_per_pass` allows (each row
    is its own computation, so the chunks change no number)."""
    tokens = tokens_tensor(rt, tokens)
    step = exact_rows_per_pass(rt, tokens.shape[1])
    if tokens.shape[0] <= step:
        return forward_resid(rt, tokens).output
    return torch.cat([forward_resid(rt, tokens[s:s + step]).output for s in range(0, tokens.shape[0], step)])


@torch.no_grad()
def node_outputs(rt: ModelState, tokens) -> torch.Tensor:
    """Every forward node's output on an unpatched run: ``[n_forward, B, P, D]``."""
    return plain_pass(rt, tokens_tensor(rt, tokens)).acts


@torch.no_grad()
def paired_outputs(rt: ModelState, base, source) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One unpatched pass over ``base`` and ``source`` rows together: ``(outputs on base
    [B, P, V], node outputs on base [F, B, P, D], node outputs on source [F, B, P, D])``.
    Both in the same (not bit-exact, see :func:`clean`) arithmetic."""
    b, s = tokens_tensor(rt, base), tokens_tensor(rt, source)
    if s.shape != b.shape:
        raise UsageError(f"source inputs have shape {tuple(s.shape)}, base inputs {tuple(b.shape)}")
    B = b.shape[0]
    res = plain_pass(rt, torch.cat([b, s]))
    return res.output[:B], res.acts[:, :B], res.acts[:, B:]


@torch.no_grad()
def plain_pass(rt: ModelState, tokens: torch.Tensor) -> RunResult:
    """The unpatched pass with every node's output (not bit-exact): the residual stream, with
    each layer's q/k/v projections fused in one matrix product (per-head inputs are all the
    residual stream here, so they are not materialised). The node outputs are written into one
    ``[n_forward, B, P, D]`` tensor as they are computed (no second copy at the end)."""
    B, P = tokens.shape
    H, D = rt.n_heads, rt.d_model
    resid = embed(rt, tokens)
    acts = torch.empty(rt.n_forward, B, P, D, dtype=resid.dtype, device=resid.device)
    acts[0] = resid
    f = 1
    for layer in range(rt.n_layers):
        blk = rt.model.blocks[layer]
        attn = blk.attn
        qkv = project_qkv(rt, layer, blk.ln1(resid))
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, H, P, dh]
        q, k = rotate(rt, layer, q), rotate(rt, layer, k)
        scores = cap_scores(rt, q @ k.transpose(-1, -2) / attn.attn_scale)
        if rt.causal:
            scores = scores.masked_fill(future_mask(rt, P, resid.device, layer), float(attn.IGNORE))
        pattern = torch.softmax(scores, dim=-1)
        pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        acts[f:f + H] = post_heads(rt, layer, torch.einsum("bhpe,hed->hbpd", pattern @ v, attn.W_O))  # [H, B, P, D]
        heads = acts[f:f + H]
        f += H
        attn_out = heads.sum(0) + attn.b_O
        outputs: list = []
        resid = add_mlp(rt, layer, resid, attn_out, outputs)
        if outputs:
            acts[f] = outputs[0][0]
            f += 1
    return RunResult(unembed(rt, resid), acts)


# a categorical output whose two largest logits are this close (relative) may rank them
# differently in the fused pass than in the model's own arithmetic: such rows are rerun exactly
TIE_RTOL = 1e-4


@torch.no_grad()
def clean_for_reference(rt: ModelState, tokens: torch.Tensor, outputs: torch.Tensor,
                        valid: torch.Tensor | None = None) -> torch.Tensor:
    """``outputs`` (of a fused pass over ``tokens``) with the rows that hold a near-tie between
    their two largest logits at a valid position replaced by the model's exact outputs
    (:func:`clean`), so the clean model's argmax is the model's own; other rows as given.
    Tracr models tie exactly; a random or trained model rarely comes close, and then nothing
    is rerun."""
    rows = near_tie_rows(outputs, valid)
    if len(rows) == 0:
        return outputs
    out = outputs.clone()
    out[rows] = clean(rt, tokens[rows])
    return out


@torch.no_grad()
def near_tie_rows(outputs: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """The rows of ``outputs [B, P, V]`` whose two largest logits are within ``TIE_RTOL`` at a
    valid position: those :func:`clean_for_reference` reruns (empty when ``V < 2``)."""
    if outputs.shape[-1] < 2:
        return torch.zeros(0, dtype=torch.long, device=outputs.device)
    top = outputs.topk(2, dim=-1).values
    near = (top[..., 0] - top[..., 1]) <= TIE_RTOL * (1.0 + top[..., 0].abs())
    if valid is not None:
        near &= torch.as_tensor(valid, device=near.device).bool()
    return near.any(-1).nonzero().flatten()
