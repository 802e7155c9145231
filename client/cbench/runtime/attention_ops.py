"""What a layer's attention does between its projections and its pattern, for every pass:
rotary position embeddings on queries and keys (:func:`rotate`), attention-score soft-capping
(:func:`cap_scores`), the visible positions (causal, and a sliding window on local layers:
:func:`future_mask`) and the pattern of one head or many (:func:`head_pattern`).

Each follows TransformerLens 3.9's own arithmetic (``AbstractAttention.apply_rotary``,
``calculate_attention_scores``, ``apply_causal_mask``), so an unpatched pass stays bit-exact:

* rotary: ``x_rot * cos + rotate_every_two(x_rot) * sin`` on the first ``rotary_dim`` features
  (NeoX pairing: halves; GPT-J pairing, ``rotary_adjacent_pairs``: neighbours), the rest
  passed through, with the layer's own ``rotary_cos``/``rotary_sin`` buffers (so rotary bases,
  scaling by parts and a local base per layer come with the model);
* soft-capping: ``cap * tanh(scores / cap)`` after dividing by ``attn_scale``, before the mask;
* a local layer (``attn_types[l] == "local"``) sees keys ``q - window_size < k <= q``.

Grouped-query attention needs nothing here: ``W_K``/``W_V`` of TransformerLens's
``GroupedQueryAttention`` are the shared key/value heads repeated per query head, so every query
head has its own k and v input (MIB's and the EAP-IG library's definition, TransformerLens's
``ungroup_grouped_query_attention``); see docs/real-models.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def rotate(rt: ModelState, layer: int, x: torch.Tensor, pos_axis: int = -2, start: int = 0) -> torch.Tensor:
    """Rotary embedding of queries or keys ``x`` (d_head last, positions ``start..`` along
    ``pos_axis``); ``x`` itself when the model has no rotary embeddings."""
    if not rt.rotary:
        return x
    attn = rt.model.blocks[layer].attn
    P = x.shape[pos_axis]
    if start + P > attn.rotary_cos.shape[0]:
        attn._extend_rotary_embeddings(min(rt.cfg.n_ctx, max(start + P, 2 * attn.rotary_cos.shape[0])))
    r = rt.cfg.rotary_dim
    shape = [1] * x.dim()
    shape[pos_axis] = P
    shape[-1] = r
    cos = attn.rotary_cos[start:start + P].view(shape)
    sin = attn.rotary_sin[start:start + P].view(shape)
    x_rot, x_pass = x[..., :r], x[..., r:]
    return torch.cat([x_rot * cos + attn.rotate_every_two(x_rot) * sin, x_pass], dim=-1)


def cap_scores(rt: ModelState, scores: torch.Tensor) -> torch.Tensor:
    """Attention scores (already divided by ``attn_scale``) soft-capped as the model does."""
    cap = rt.attn_soft_cap
    if cap is None:
        return scores
    return cap * torch.tanh(scores / cap)


def cap_logits(rt: ModelState, logits: torch.Tensor) -> torch.Tensor:
    """The model outputs soft-capped as the model does (Gemma-2's final soft-cap)."""
    cap = rt.logit_soft_cap
    if cap is None:
        return logits
    return cap * torch.tanh(logits / cap)


def future_mask(rt: ModelState, P: int, device, layer: int | None = None) -> torch.Tensor:
    """``[P, P]`` bool, True where a query (row) may not see a key (column): above the
    diagonal, and on a local layer ``layer`` also ``window_size`` or more positions back."""
    window = rt.windows[layer] if layer is not None and rt.windows else None
    cache = rt._future_cache
    key = (P, str(device), window)
    if key not in cache:
        with torch.inference_mode(False):  # usable by autograd passes later too
            hidden = torch.ones(P, P, dtype=torch.bool, device=device).triu(1)
            if window is not None:
                hidden |= torch.ones(P, P, dtype=torch.bool, device=device).tril(-window)
            cache[key] = hidden
    return cache[key]


def head_pattern(rt: ModelState, layer: int, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Attention pattern ``[..., Pq, Pk]`` from projected queries ``q [..., Pq, dh]`` (the
    last ``Pq`` positions) and keys ``k [..., Pk, dh]`` (positions ``0..``): rotary,
    ``/ attn_scale``, soft-cap, the causal (and local) mask, softmax."""
    attn = rt.model.blocks[layer].attn
    q = rotate(rt, layer, q, -2, k.shape[-2] - q.shape[-2])
    k = rotate(rt, layer, k, -2, 0)
    scores = cap_scores(rt, q @ k.transpose(-1, -2) / attn.attn_scale)
    Pq, Pk = scores.shape[-2], scores.shape[-1]
    if rt.causal:
        scores = scores.masked_fill(future_mask(rt, Pk, scores.device, layer)[Pk - Pq:], float(attn.IGNORE))
    # every row keeps at least its own position, so no row is all-masked (no NaN to clear)
    if Pk < 8:  # the fused kernel is slow on very short rows; same values to float rounding
        e = (scores - scores.detach().amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)
    return torch.softmax(scores, dim=-1)
