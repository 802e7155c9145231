"""Model parameters the passes read through caches: the constant attention-output bias every
destination receives (sums of b_O, see the package docstring) and each layer's q/k/v
projections fused into one matrix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from cbench.runtime.circuit_runtime import CircuitRuntime


@dataclass(frozen=True)
class DestinationBiases:
    """The constant b_O sums destinations receive unmasked: ``attn[l]`` for the q/k/v inputs
    of layer ``l``'s heads (b_O of layers < l), ``mlp[l]`` for MLP ``l``'s input (b_O of
    layers <= l; parallel attention and MLP: < l), ``logits`` for the final residual (all)."""

    attn: list[torch.Tensor]
    mlp: list[torch.Tensor]
    logits: torch.Tensor


def destination_biases(model, parallel: bool, d_model: int, device: torch.device,
                       dtype: torch.dtype) -> DestinationBiases:
    """The :class:`DestinationBiases` of ``model`` (detached)."""
    with torch.no_grad():
        b_o = [blk.attn.b_O.detach().to(device) for blk in model.blocks]
        zero = torch.zeros(d_model, device=device, dtype=dtype)
        bias_attn, bias_mlp = [], []
        acc = zero.clone()
        for layer in range(len(b_o)):
            bias_attn.append(acc.clone())
            bias_mlp.append(acc.clone() if parallel else acc + b_o[layer])
            acc = acc + b_o[layer]
        return DestinationBiases(bias_attn, bias_mlp, acc)


def slot_bias(rt: CircuitRuntime, slot: int) -> torch.Tensor:
    """The constant bias of backward slot ``slot`` ``[D]``."""
    layer, rest = divmod(slot, rt.per_layer_bwd)
    if layer == rt.n_layers:
        return rt._biases.logits
    return rt._biases.attn[layer] if rest < 3 * rt.n_heads else rt._biases.mlp[layer]


def slot_bias_stack(rt: CircuitRuntime) -> torch.Tensor:
    """Every backward slot's constant bias ``[n_backward, D]`` (cached)."""
    if rt._slot_bias_stack is None:
        with torch.inference_mode(False):
            rt._slot_bias_stack = torch.stack([slot_bias(rt, k) for k in range(rt.n_backward)])
    return rt._slot_bias_stack


def qkv_weights(rt: CircuitRuntime, layer: int):
    """Layer ``layer``'s q, k and v projections fused: ``(W [D, 3*H*d_head], b [3*H*d_head],
    W_rows [3H, D, d_head])`` (rows in backward-slot order: q of every head, then k, then v)."""
    cache = rt._qkv_cache
    if layer not in cache:
        with torch.inference_mode(False), torch.no_grad():  # usable by autograd passes later too
            cache[layer] = fuse_qkv(rt.model.blocks[layer].attn)
    return cache[layer]


def fuse_qkv(attn):
    """``(W, b, W_rows)`` of :func:`qkv_weights` from one attention module (detached)."""
    rows = torch.cat([attn.W_Q, attn.W_K, attn.W_V], 0).detach()  # [3H, D, dh]
    W = rows.permute(1, 0, 2).reshape(rows.shape[1], -1).contiguous()
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], 0).detach().reshape(-1)
    return W, b, rows
