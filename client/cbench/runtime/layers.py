"""The model's layers as the passes call them: embedding, attention on per-head inputs, MLP,
unembedding (with the final layer norm) and the causal mask."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable

import torch

from cbench.runtime.attention_ops import cap_logits, cap_scores, future_mask, rotate
from cbench.runtime.contractions import heads_out, per_head_project, shared_project
from cbench.runtime.weights import qk_position

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def embed(rt: ModelState, tokens: torch.Tensor) -> torch.Tensor:
    """The ``input`` node's output: token embedding + positional embedding ``[B, P, D]`` (the
    token embedding alone with rotary or shortformer embeddings, which act inside attention)."""
    m = rt.model
    if rt.rotary or rt.shortformer:
        return m.embed(tokens)
    return m.embed(tokens) + m.pos_embed(tokens)


def attention(rt: ModelState, layer: int, x: torch.Tensor, tl_order: bool = False,
              heads: torch.Tensor | None = None) -> torch.Tensor:
    """Heads of ``layer`` on per-head inputs ``x[B, P, 3H, D]`` (q inputs, k inputs, v inputs,
    already summed, before ln1), or on one input ``x[B, P, D]`` that every head reads; returns per-head results ``[H, B, P, D]`` without b_O
    (``tl_order``: ``[B, P, H, D]`` computed exactly as TransformerLens does). ``heads``:
    only these head indices (x then holds their q, k, v inputs)."""
    blk = rt.model.blocks[layer]
    attn = blk.attn
    W_Q, W_K, W_V, W_O = attn.W_Q, attn.W_K, attn.W_V, attn.W_O
    b_Q, b_K, b_V = attn.b_Q, attn.b_K, attn.b_V
    if heads is not None:
        W_Q, W_K, W_V, W_O = W_Q[heads], W_K[heads], W_V[heads], W_O[heads]
        b_Q, b_K, b_V = b_Q[heads], b_K[heads], b_V[heads]
    H = W_Q.shape[0]
    x = blk.ln1(x)
    pos = qk_position(rt, x.shape[1])
    if x.dim() == 3:  # one input [B, P, D] read by every head: normalised once
        xqk = x if pos is None else x + pos
        q = shared_project(xqk, W_Q) + b_Q
        k = shared_project(xqk, W_K) + b_K
        v = shared_project(x, W_V) + b_V
    else:
        q_in, k_in, v_in = x[:, :, :H], x[:, :, H:2 * H], x[:, :, 2 * H:3 * H]
        if pos is not None:  # shortformer: after ln1, on queries and keys
            q_in, k_in = q_in + pos[:, None], k_in + pos[:, None]
        q = per_head_project(q_in, W_Q) + b_Q
        k = per_head_project(k_in, W_K) + b_K
        v = per_head_project(v_in, W_V) + b_V
    q, k = rotate(rt, layer, q, 1), rotate(rt, layer, k, 1)
    scores = cap_scores(rt, q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1) / attn.attn_scale)  # [B, H, Q, K]
    if rt.causal:
        P = scores.shape[-1]
        scores = torch.where(~future_mask(rt, P, scores.device, layer), scores, attn.IGNORE.to(scores.device))
    pattern = torch.softmax(scores, dim=-1)
    pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
    z = pattern @ v.permute(0, 2, 1, 3)  # [B, H, P, d_head]
    if tl_order:  # TransformerLens's exact arithmetic for hook_result: [B, P, H, D]
        z = z.permute(0, 2, 1, 3)
        return (z[..., None] * W_O[None, None]).sum(-2)
    return heads_out(z, W_O)


def post_heads(rt: ModelState, layer: int, heads: torch.Tensor, axis: int = 0) -> torch.Tensor:
    """Per-head outputs as they enter the residual stream: ``heads`` (each head's ``hook_result``,
    head axis ``axis``) themselves, or with a post-norm (Gemma-2's ``ln1_post``, RMSNorm on
    the summed heads) each head's share of it, ``w * result_h / rms(sum_h result_h)``, the rms
    taken over this run's summed heads. They sum to ``ln1_post(attn_out)`` (no b_O, refused
    otherwise): the norm's scale is one number per position, so it distributes over the heads;
    a head whose output is patched passes on its share in the run it is taken from (see
    docs/real-models.md)."""
    if not rt.post_norm:
        return heads
    ln = rt.model.blocks[layer].ln1_post
    total = heads.sum(axis, keepdim=True)
    if total.dtype not in (torch.float32, torch.float64):
        total = total.float()
    scale = (total.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt()  # TransformerLens's RMSNorm
    return (heads / scale).to(heads.dtype) * ln.w


def post_attention(rt: ModelState, layer: int, attn_out: torch.Tensor) -> torch.Tensor:
    """The attention output added to the residual stream from the summed heads plus b_O
    (``ln1_post`` with a post-norm)."""
    return rt.model.blocks[layer].ln1_post(attn_out) if rt.post_norm else attn_out


def mlp(rt: ModelState, layer: int, x: torch.Tensor) -> torch.Tensor:
    """MLP ``layer``'s output (``hook_mlp_out``, with b_out, after ``ln2_post`` when the model
    post-normalizes) from its input before ln2."""
    blk = rt.model.blocks[layer]
    out = blk.mlp(blk.ln2(x))
    return blk.ln2_post(out) if rt.post_norm else out


def add_mlp(rt: ModelState, layer: int, resid: torch.Tensor, attn_out: torch.Tensor,
            outputs: list) -> torch.Tensor:
    """The residual after layer ``layer`` from its input ``resid`` and attention output (as
    added to the residual, after any post-norm): with an MLP, its output is added (and appended to ``outputs`` as ``[1, ...]``)."""
    if not rt.has_mlp:
        return resid + attn_out
    mlp_out = mlp(rt, layer, resid if rt.parallel else resid + attn_out)
    outputs.append(mlp_out[None])
    return resid + attn_out + mlp_out


def unembed(rt: ModelState, x: torch.Tensor) -> torch.Tensor:
    """The model outputs from the final residual (``ln_final``, then the unembedding)."""
    m = rt.model
    ln = getattr(m, "ln_final", None)
    if ln is not None:
        x = ln(x)
    return cap_logits(rt, m.unembed(x))


def unembed_fn(rt: ModelState) -> Callable[[torch.Tensor], torch.Tensor]:
    """``logits``' output from the final residual, as :func:`unembed` computes it, with the
    module calls resolved once (for callers that run it many times; with live weights
    :func:`unembed` itself)."""
    m = rt.model
    ln = getattr(m, "ln_final", None)
    if rt.live_weights or rt.logit_soft_cap is not None or (ln is not None and not isinstance(ln, torch.nn.Identity)):
        return partial(unembed, rt)
    if type(m.unembed).__name__ == "Unembed" and type(m.unembed).forward.__module__.startswith("transformer_lens"):
        W, b = m.unembed.W_U.T.contiguous(), m.unembed.b_U
        return lambda x: torch.nn.functional.linear(x, W, b)
    return partial(unembed, rt)
