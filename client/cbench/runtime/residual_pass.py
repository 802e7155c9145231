"""The pass without edge masks, in TransformerLens's own order of operations: the residual
stream summed layer by layer (bit-for-bit ``HookedTransformer.forward`` when nothing is
masked), with node masks and input probes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.runtime.layers import attention, embed, mlp, post_attention, post_heads, unembed
from cbench.runtime.masks import mix_node_outputs
from cbench.runtime.run_result import RunResult

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def forward_resid(rt: ModelState, tokens, node_mask=None, ablated=None, input_probe=False,
                  keep_acts=False, exact: bool = True) -> RunResult:
    """The residual-stream pass. ``node_mask`` ([F] or [C, F], row c for examples c*B/C...):
    each node's output becomes ``n * out + (1 - n) * ablated`` before anything reads it, which
    is what a node mask means on the edge formulation too. ``input_probe``: a zero tensor added
    to every destination input, whose gradient is d output / d input (EAP)."""
    B, P = tokens.shape
    H, D = rt.n_heads, rt.d_model
    nm = node_mask
    if nm is not None and nm.dim() == 1:
        nm = nm[None]
    probe = None
    if input_probe:
        probe = torch.zeros(rt.n_backward, B, P, D, dtype=rt.dtype, device=rt.device, requires_grad=True)

    def probe_at(col0, col1):
        return probe[col0:col1].permute(1, 2, 0, 3)  # [B, P, k, D]

    emb = embed(rt, tokens)
    resid = mix_node_outputs(emb[:, :, None], nm, ablated, 0, 1)[:, :, 0]
    chunks = [resid[None]] if keep_acts else None
    f = 1
    for layer in range(rt.n_layers):
        blk = rt.model.blocks[layer]
        col = layer * rt.per_layer_bwd
        x = resid
        if probe is not None or exact:  # per-head inputs (TransformerLens normalises each)
            x = resid[:, :, None, :].expand(-1, -1, 3 * H, -1)
        if probe is not None:
            x = x + probe_at(col, col + 3 * H)
        if exact:
            heads = attention(rt, layer, x, tl_order=True)  # [B, P, H, D]
        else:
            heads = attention(rt, layer, x).permute(1, 2, 0, 3)
        if rt.post_norm and nm is None and not keep_acts:  # the model's own arithmetic
            attn_out = post_attention(rt, layer, heads.sum(2) + blk.attn.b_O)
        else:
            heads = mix_node_outputs(post_heads(rt, layer, heads, 2), nm, ablated, f, f + H)
            attn_out = heads.sum(2) + blk.attn.b_O  # b_O is zero with a post-norm
        f += H
        if keep_acts:
            chunks.append(heads.permute(2, 0, 1, 3))
        if rt.has_mlp:
            mlp_in = resid if rt.parallel else resid + attn_out
            if probe is not None:
                mlp_in = mlp_in + probe_at(col + 3 * H, col + 3 * H + 1)[:, :, 0]
            mlp_out = mix_node_outputs(mlp(rt, layer, mlp_in.clone())[:, :, None], nm, ablated, f, f + 1)[:, :, 0]
            f += 1
            resid = resid + attn_out + mlp_out
            if keep_acts:
                chunks.append(mlp_out[None])
        else:
            resid = resid + attn_out
    if probe is not None:
        resid = resid + probe_at(rt.n_backward - 1, rt.n_backward)[:, :, 0]
    out = unembed(rt, resid)
    return RunResult(out, torch.cat(chunks, 0) if keep_acts else None, probe)
