"""Unpatched runs: the model's outputs bit-exact (:func:`clean`) and every node's output in one
pass with each layer's q/k/v projections fused (:func:`node_outputs`, :func:`paired_outputs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.errors import UsageError
from cbench.runtime.layers import add_mlp, embed, future_mask, unembed
from cbench.runtime.masks import tokens_tensor
from cbench.runtime.residual_pass import forward_resid
from cbench.runtime.run_result import RunResult
from cbench.runtime.weights import qkv_weights

if TYPE_CHECKING:
    from cbench.runtime.circuit_runtime import CircuitRuntime


@torch.no_grad()
def clean(rt: CircuitRuntime, tokens) -> torch.Tensor:
    """The unpatched model's outputs ``[B, P, d_vocab_out]`` (same numbers as the model)."""
    return forward_resid(rt, tokens_tensor(rt, tokens)).output


@torch.no_grad()
def node_outputs(rt: CircuitRuntime, tokens) -> torch.Tensor:
    """Every forward node's output on an unpatched run: ``[n_forward, B, P, D]``."""
    return plain_pass(rt, tokens_tensor(rt, tokens)).acts


@torch.no_grad()
def paired_outputs(rt: CircuitRuntime, base, source) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
def plain_pass(rt: CircuitRuntime, tokens: torch.Tensor) -> RunResult:
    """The unpatched pass with every node's output (not bit-exact): the residual stream, with
    each layer's q/k/v projections fused in one matrix product (per-head inputs are all the
    residual stream here, so they are not materialised)."""
    B, P = tokens.shape
    H, D = rt.n_heads, rt.d_model
    resid = embed(rt, tokens)
    chunks = [resid[None]]
    future = future_mask(rt, P, resid.device) if rt.causal else None
    for layer in range(rt.n_layers):
        blk = rt.model.blocks[layer]
        attn = blk.attn
        W, b, _rows = qkv_weights(rt, layer)
        d_head = W.shape[1] // (3 * H)
        qkv = torch.addmm(b, blk.ln1(resid).reshape(B * P, D), W).view(B, P, 3, H, d_head)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, H, P, dh]
        scores = q @ k.transpose(-1, -2) / attn.attn_scale
        if future is not None:
            scores = scores.masked_fill(future, float(attn.IGNORE))
        pattern = torch.softmax(scores, dim=-1)
        pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        heads = torch.einsum("bhpe,hed->hbpd", pattern @ v, attn.W_O)  # [H, B, P, D]
        chunks.append(heads)
        attn_out = heads.sum(0) + attn.b_O
        resid = add_mlp(rt, layer, resid, attn_out, chunks)
    return RunResult(unembed(rt, resid), torch.cat(chunks, 0))
