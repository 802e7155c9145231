"""The model parameters as the passes read them: the constant attention-output bias every
destination receives (sums of b_O, see the package docstring) and each layer's q/k/v
projections fused into one matrix. Cached and detached by default; with
``ModelState(..., live_weights=True)`` read from the model at every call, with gradient."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


@dataclass(frozen=True)
class DestinationBiases:
    """The constant b_O sums destinations receive unmasked: ``attn[l]`` for the q/k/v inputs
    of layer ``l``'s heads (b_O of layers < l), ``mlp[l]`` for MLP ``l``'s input (b_O of
    layers <= l; parallel attention and MLP: < l), ``logits`` for the final residual (all)."""

    attn: list[torch.Tensor]
    mlp: list[torch.Tensor]
    logits: torch.Tensor


def _bias_sums(rt: ModelState, b_o: list[torch.Tensor]) -> DestinationBiases:
    """The :class:`DestinationBiases` from every layer's b_O."""
    bias_attn, bias_mlp = [], []
    acc = torch.zeros(rt.d_model, device=rt.device, dtype=rt.dtype)
    for layer in range(len(b_o)):
        bias_attn.append(acc.clone())
        bias_mlp.append(acc.clone() if rt.parallel else acc + b_o[layer])
        acc = acc + b_o[layer]
    return DestinationBiases(bias_attn, bias_mlp, acc)


def current_biases(rt: ModelState) -> DestinationBiases:
    """The runtime's :class:`DestinationBiases`: the cached ones, or with live weights the
    model's b_O now (gradients flow to it)."""
    if not rt.live_weights:
        return rt._biases
    return _bias_sums(rt, [blk.attn.b_O.to(rt.device) for blk in rt.model.blocks])


def refresh_weights(rt: ModelState) -> None:
    """Read the model's parameters into the caches again (after the model changed, e.g. an
    optimizer step). A runtime with live weights keeps no such caches."""
    with torch.no_grad():
        b_o = [blk.attn.b_O.detach().to(rt.device) for blk in rt.model.blocks]
        rt._biases = None if rt.live_weights else _bias_sums(rt, b_o)
    rt._slot_bias_stack = None
    rt._qkv_cache = {}


def slot_bias(rt: ModelState, slot: int, sums: DestinationBiases) -> torch.Tensor:
    """The constant bias of backward slot ``slot`` ``[D]``."""
    layer, rest = divmod(slot, rt.per_layer_bwd)
    if layer == rt.n_layers:
        return sums.logits
    return sums.attn[layer] if rest < 3 * rt.n_heads else sums.mlp[layer]


def slot_bias_stack(rt: ModelState) -> torch.Tensor:
    """Every backward slot's constant bias ``[n_backward, D]`` (cached unless live)."""
    if rt.live_weights:
        sums = current_biases(rt)
        return torch.stack([slot_bias(rt, k, sums) for k in range(rt.n_backward)])
    if rt._slot_bias_stack is None:
        with torch.inference_mode(False):
            rt._slot_bias_stack = torch.stack([slot_bias(rt, k, rt._biases) for k in range(rt.n_backward)])
    return rt._slot_bias_stack


def qkv_weights(rt: ModelState, layer: int):
    """Layer ``layer``'s q, k and v projections fused: ``(W [D, 3*H*d_head], b [3*H*d_head],
    W_rows [3H, D, d_head])`` (rows in backward-slot order: q of every head, then k, then v).
    Cached and detached, or with live weights fused from the model now."""
    if rt.live_weights:
        return fuse_qkv(rt.model.blocks[layer].attn, detach=False)
    cache = rt._qkv_cache
    if layer not in cache:
        with torch.inference_mode(False), torch.no_grad():  # usable by autograd passes later too
            cache[layer] = fuse_qkv(rt.model.blocks[layer].attn)
    return cache[layer]


def qk_position(rt: ModelState, P: int, start: int = 0) -> torch.Tensor | None:
    """A shortformer model's position embedding ``[P, D]`` of positions ``start..``, which its
    heads' query and key inputs get after ln1 (TransformerLens's ``shortformer_pos_embed``);
    None for other models."""
    if not rt.shortformer:
        return None
    return rt.model.pos_embed.W_pos[start:start + P]


def add_qk_position(rt: ModelState, y: torch.Tensor, start: int = 0) -> torch.Tensor:
    """``y [..., P, D]`` (a query's or key's normalised input, positions ``start..``) plus a
    shortformer model's position embedding there; ``y`` itself for other models."""
    pos = qk_position(rt, y.shape[-2], start)
    return y if pos is None else y + pos


def project_qkv(rt: ModelState, layer: int, ln_out: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Every head's q, k and v ``[R, P, 3, H, d_head]`` of layer ``layer`` from its normalised
    input ``ln_out [R, P, D]`` (positions ``start..``), the projections fused; a shortformer model's
    queries and keys read ``ln_out`` plus the position embedding, its values ``ln_out``."""
    W, b, _rows = qkv_weights(rt, layer)
    R, P, D = ln_out.shape
    H = rt.n_heads
    d_head = W.shape[1] // (3 * H)
    pos = qk_position(rt, P, start)
    if pos is None:
        return torch.addmm(b, ln_out.reshape(R * P, D), W).view(R, P, 3, H, d_head)
    n = 2 * H * d_head
    qk = torch.addmm(b[:n], (ln_out + pos).reshape(R * P, D), W[:, :n])
    v = torch.addmm(b[n:], ln_out.reshape(R * P, D), W[:, n:])
    return torch.cat([qk, v], 1).view(R, P, 3, H, d_head)


def fuse_qkv(attn, detach: bool = True):
    """``(W, b, W_rows)`` of :func:`qkv_weights` from one attention module."""
    rows = torch.cat([attn.W_Q, attn.W_K, attn.W_V], 0)  # [3H, D, dh]
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], 0)
    if detach:
        rows, b = rows.detach(), b.detach()
    W = rows.permute(1, 0, 2).reshape(rows.shape[1], -1).contiguous()
    return W, b.reshape(-1), rows
