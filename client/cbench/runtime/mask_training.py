"""The edge-masked pass as UGS trains through it: the same function as
:func:`cbench.runtime.masked_forward.masked_pass` under one differentiable edge mask per pair, in
fewer and larger operations, for the hundred forward and backward passes of a training run on
the same pairs.

Every destination's input is written as what the ablation alone gives it plus the masked
differences of its sources::

    input[dst] = base[dst] + sum_src M[src, dst] * (acts[src] - ablated[src])
    base[dst]  = sum_src real[src, dst] * ablated[src] + bias[dst]

(the masked pass's ``M * acts + (1 - M) * ablated`` over the graph's real edges, summed in
another order, so the two agree to float32 rounding: about 1e-7 relative on the outputs).
``base`` does not depend on the mask and is computed once per run for every pair, as is the
``input`` node's difference (its output does not depend on the mask either). Node outputs are
kept destination-major (``[k, B, P, D]``), so a layer's q, k and v projections are one batched
product over its 3H head inputs and no operand is permuted into another layout; each gather
reads its mask entries straight from the edge vector (an index per gather) instead of a
scattered (forward x backward) matrix. On the benchmark's small models a training step is mostly
per-operation overhead, forward and backward, so fewer operations are most of the gain.

Only UGS trains through it: its estimate averages the gradients of many random masks, and the
scores it gives agree with the masked pass's to about 1e-3 (the bench's table is the same).
Subnetwork probing's hard-concrete training amplifies float rounding into different scores on
some cases (a mask logit whose gradient is only rounding noise still moves by the full learning
rate under Adam), so it keeps the masked pass, whose scores the bench's table was made with.

Models with a feature this pass does not run (a post-norm, shortformer positions, live weights),
and runs whose precomputed inputs would not fit the memory budget, take
:func:`cbench.runtime.masked_forward.run` instead (:func:`supported`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.runtime.attention_ops import cap_scores, future_mask, rotate
from cbench.runtime.layers import embed, mlp, unembed_fn
from cbench.runtime.memory import budget_bytes
from cbench.runtime.weights import qkv_weights, slot_bias_stack

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def supported(rt: ModelState, tokens: torch.Tensor, ablated: torch.Tensor) -> bool:
    """Whether :class:`EdgeMaskTraining` runs this model on these pairs (else the general masked
    pass does): not where the model has a feature it does not run, nor where what it holds for
    the run (every destination's ``base`` and the ablated outputs of every pair, ``(n_backward +
    n_forward) x N x P x D`` floats) exceeds the per-pass memory budget (``CBENCH_MEMORY_MB``;
    a GPT-2-small-sized graph on 100 pairs would need about 3 GB)."""
    if rt.post_norm or rt.shortformer or rt.live_weights:
        return False
    N, P = tokens.shape
    rows = N if ablated.shape[1] == N and N > 1 else 1
    held = (rt.n_backward + rt.n_forward) * rows * P * rt.d_model * rt.dtype.itemsize
    return held <= budget_bytes()


class EdgeMaskTraining:
    """Masked runs of pairs of ``tokens [N, P]`` with ablated node outputs ``ablated [F, N|1,
    P|1, D]`` (one row per pair, or one row for every pair), one edge mask per pair; what does
    not depend on the masks is computed here, once."""

    def __init__(self, rt: ModelState, tokens: torch.Tensor, ablated: torch.Tensor):
        self.rt = rt
        F, K, D = rt.n_forward, rt.n_backward, rt.d_model
        N, P = tokens.shape
        with torch.no_grad():
            abl = ablated.to(rt.dtype)
            self.per_pair = abl.shape[1] == N and N > 1
            abl = abl.expand(F, abl.shape[1], P, D)  # [F, N|1, P, D]
            R = abl.shape[1]
            base = torch.mm(rt._real.t(), abl.reshape(F, -1)).view(K, R, P, D)
            self.base = (base + slot_bias_stack(rt)[:, None, None, :]).contiguous()  # [K, N|1, P, D]
            self.ablated = abl.contiguous()
            self.input_delta = (embed(rt, tokens) - abl[0])[None]  # [1, N, P, D]
        g = rt.graph
        E = g.n_edges
        lookup = torch.full((F, K), E, dtype=torch.long)  # mask entry per (source, destination); E: no edge
        lookup[torch.as_tensor(g.edge_forward), torch.as_tensor(g.edge_backward)] = torch.arange(E)
        self._lookup = lookup.t().contiguous().to(rt.device)  # [K, F]
        self._index: dict = {}
        self.unembed = unembed_fn(rt)
        mlp0 = rt.model.blocks[0].mlp if rt.has_mlp else None
        self._plain_mlp = (mlp0 is not None and type(mlp0).__name__ == "MLP"
                           and not rt.cfg.is_layer_norm_activation())

    def _mask_entries(self, k0: int, k1: int, n_src: int) -> torch.Tensor:
        """Indices ``[k * n_src]`` into the padded edge vector: destinations ``k0..k1-1``'s masks."""
        key = (k0, k1, n_src)
        if key not in self._index:
            self._index[key] = self._lookup[k0:k1, :n_src].reshape(-1)
        return self._index[key]

    def run(self, rows: torch.Tensor | None, edge_mask: torch.Tensor) -> torch.Tensor:
        """Model outputs ``[B, P, V]`` of pairs ``rows`` (None: all ``N``) under ``edge_mask
        [B, E]``, one mask per pair."""
        rt = self.rt
        L, H = rt.n_layers, rt.n_heads
        mask = torch.cat([edge_mask, edge_mask.new_zeros(edge_mask.shape[0], 1)], 1)  # entry E: "no edge"
        base, abl, delta0 = self.base, self.ablated, self.input_delta
        if rows is not None:
            rows = rows.to(delta0.device)
            delta0 = delta0.index_select(1, rows)
            if self.per_pair:
                base, abl = base.index_select(1, rows), abl.index_select(1, rows)
        B, P, D = delta0.shape[1], delta0.shape[2], delta0.shape[3]
        blocks = [delta0]  # each node's output minus its ablated output, [k, B, P, D], node order

        def gather(k0: int, k1: int, n_src: int) -> torch.Tensor:
            """Inputs ``[k, B, P, D]`` of destinations ``k0..k1-1`` from the first ``n_src`` nodes."""
            src = blocks[0] if len(blocks) == 1 else torch.cat(blocks, 0)
            src = src[:n_src] if src.shape[0] > n_src else src
            k = k1 - k0
            m = mask[:, self._mask_entries(k0, k1, n_src)].view(B, k, n_src)
            x = torch.bmm(m, src.view(n_src, B, P * D).transpose(0, 1)).transpose(0, 1)  # one product per pair
            return base[k0:k1] + x.view(k, B, P, D)

        f = 1
        for layer in range(L):
            col = layer * rt.per_layer_bwd
            heads = self._attention(layer, rt.model.blocks[layer].ln1(gather(col, col + 3 * H, f)))
            blocks.append(heads - abl[f:f + H])
            f_mlp = f + H
            if rt.has_mlp:
                out = self._mlp(layer, gather(col + 3 * H, col + 3 * H + 1, f if rt.parallel else f_mlp)[0])
                blocks.append(out[None] - abl[f_mlp:f_mlp + 1])
            f += rt.per_layer_fwd
        col = L * rt.per_layer_bwd
        return self.unembed(gather(col, col + 1, rt.n_forward)[0])

    def _mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """MLP ``layer``'s output from its input ``x [B, P, D]`` (before ln2)."""
        rt = self.rt
        if self._plain_mlp:  # TransformerLens's MLP without its hook points (the same products)
            module = rt.model.blocks[layer].mlp
            xin = rt.model.blocks[layer].ln2(x)
            shape = xin.shape
            pre = torch.addmm(module.b_in, xin.reshape(-1, shape[-1]), module.W_in)
            out = torch.addmm(module.b_out, module.act_fn(pre), module.W_out)
            return out.view(*shape[:-1], out.shape[-1])
        return mlp(rt, layer, x)

    def _attention(self, layer: int, y: torch.Tensor) -> torch.Tensor:
        """Every head's output ``[H, B, P, D]`` (``hook_result``, without b_O) from its q, k and v
        inputs after ln1, ``y [3H, B, P, D]``, as :func:`cbench.runtime.layers.attention`
        computes it."""
        rt = self.rt
        H = rt.n_heads
        attn = rt.model.blocks[layer].attn
        _W, b, w_rows = qkv_weights(rt, layer)  # w_rows [3H, D, dh]: q of every head, then k, then v
        _, B, P, D = y.shape
        dh = w_rows.shape[-1]
        qkv = torch.baddbmm(b.view(3 * H, 1, dh), y.reshape(3 * H, B * P, D), w_rows).view(3, H, B, P, dh)
        q, k, v = qkv.unbind(0)
        if rt.rotary:
            q, k = rotate(rt, layer, q), rotate(rt, layer, k)
        q, k, v = q.reshape(H * B, P, dh), k.reshape(H * B, P, dh), v.reshape(H * B, P, dh)
        scores = cap_scores(rt, torch.bmm(q, k.transpose(1, 2)) / attn.attn_scale)  # [H B, Q, K]
        if rt.causal:
            scores = scores.masked_fill(future_mask(rt, P, scores.device, layer), float(attn.IGNORE))
        z = torch.bmm(torch.softmax(scores, dim=-1), v)  # [H B, P, dh]
        return torch.bmm(z.view(H, B * P, dh), attn.W_O).view(H, B, P, D)
