"""One node at a time, for incremental passes (ACDC): every destination's unmasked input from
node outputs (:func:`destination_inputs`) and one node's output from its own inputs
(:func:`node_output`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.errors import GraphError, UnsupportedModelError
from cbench.runtime.attention_ops import head_pattern
from cbench.runtime.layers import mlp, unembed
from cbench.runtime.weights import add_qk_position, slot_bias_stack

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def destination_inputs(rt: ModelState, acts: torch.Tensor) -> torch.Tensor:
    """The input of every destination ``[n_backward, B, P, D]`` when every edge is kept, from
    node outputs ``acts [n_forward, B, P, D]``: the sum of its sources plus its constant bias."""
    bias = slot_bias_stack(rt)
    F, K = acts.shape[0], rt.n_backward
    bias = bias.view((K,) + (1,) * (acts.dim() - 2) + (-1,))
    last = rt._prefix_sources
    if last is not None:  # running sums, then each destination's prefix
        run = torch.empty_like(acts)
        run[0] = acts[0]
        for f in range(1, F):
            torch.add(run[f - 1], acts[f], out=run[f])
        return run.index_select(0, last).add_(bias)
    out = torch.mm(rt._real.t(), acts.reshape(F, -1)).view((K,) + tuple(acts.shape[1:]))
    return out.add_(bias)


def node_output(rt: ModelState, node: str, x) -> torch.Tensor:
    """The output of one node from its own (already summed) inputs, for incremental passes:
    a head takes ``x = (q_in, k_in, v_in)``, each ``[..., P, D]`` with leading dimensions that
    broadcast against each other (an input shared by every row is projected once), and gives
    ``[..., P, D]``; an MLP takes ``[..., P, D]``; ``logits`` takes the final residual
    ``[..., P, D]`` and gives the model outputs ``[..., P, d_vocab_out]``."""
    n = rt.graph.node(node)
    if n.kind == "head" and rt.post_norm:
        raise UnsupportedModelError(
            f"one head's output alone on a post-normalized model ({node}: its share of ln1_post "
            "depends on every head of its layer); run the layer's masked pass instead")
    if n.kind == "mlp" and rt.post_norm:
        return mlp(rt, n.layer, x)
    if n.kind == "head":
        blk = rt.model.blocks[n.layer]
        attn, h = blk.attn, n.head
        q_in, k_in, v_in = x
        yk = add_qk_position(rt, blk.ln1(k_in))  # keys: every position from 0; queries: the last ones
        yq = add_qk_position(rt, blk.ln1(q_in), yk.shape[-2] - q_in.shape[-2])
        q = yq @ attn.W_Q[h] + attn.b_Q[h]
        k = yk @ attn.W_K[h] + attn.b_K[h]
        v = blk.ln1(v_in) @ attn.W_V[h] + attn.b_V[h]
        pattern = head_pattern(rt, n.layer, q, k)
        return (pattern @ v) @ attn.W_O[h]
    if n.kind == "mlp":
        module = rt.model.blocks[n.layer].mlp
        if type(module).__name__ == "MLP" and not rt.cfg.is_layer_norm_activation():
            # TransformerLens's MLP without its hook points (the same products)
            xin = rt.model.blocks[n.layer].ln2(x)
            shape = xin.shape
            pre = torch.addmm(module.b_in, xin.reshape(-1, shape[-1]), module.W_in)
            out = torch.addmm(module.b_out, module.act_fn(pre), module.W_out)
            return out.view(*shape[:-1], out.shape[-1])
        return mlp(rt, n.layer, x)
    if n.kind == "logits":
        return unembed(rt, x)
    raise GraphError(f"node {node!r} has no inputs")
