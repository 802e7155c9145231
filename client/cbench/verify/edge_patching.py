"""Exact patching of one edge at a time, from the clean run's node outputs: the pass behind the
stress tier's floor gate (:mod:`cbench.verify.mechanisms`), which measures every edge outside a
circuit alone.

Ablating one edge ``u -> X`` (its source's output taken from the ablation on that edge only)
leaves every node before ``X`` at its clean output and changes ``X``'s input by
``ablated[u] - clean[u]``. In a transformer's graph every destination reads the residual stream
(all the nodes before it), so the rest of the patched run is the unpatched forward from the clean
residual at ``X`` plus the change in ``X``'s output: each edge costs a forward pass from its
destination's layer on, and the edges into one node run together, stacked on the batch dimension.
The outputs are those of the edge-masked pass (``CircuitRuntime.run_masks`` with one zero per
mask) up to float32 rounding of the order of the sums (tests/test_stress_edge_patching.py).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

from cbench.runtime.layers import attention, future_mask, mlp, unembed
from cbench.runtime.memory import budget_bytes, output_width
from cbench.runtime.weights import project_qkv

#: [P, D] tensors alive per (edge x example) row at the peak of a pass (inputs, outputs, residual,
#: the MLP's hidden layer and the temporaries beside them), counted generously, besides the
#: per-head outputs of a layer (one per head)
_TENSORS_PER_ROW = 12


def applies(rt) -> bool:
    """True when every destination reads a prefix of the nodes (the residual stream), which the
    pass relies on; a graph of another shape takes the edge-masked pass."""
    return rt._prefix_sources is not None


def edges_per_pass(rt, n_examples: int, positions: int, budget: float | None = None) -> int:
    """How many edges' patched runs of all ``n_examples`` fit one pass within the memory budget
    (``CBENCH_MEMORY_MB``); at least one."""
    itemsize = rt.dtype.itemsize
    row = ((_TENSORS_PER_ROW + rt.n_heads) * rt.d_model + 3 * output_width(rt)) * positions * itemsize
    budget = budget_bytes() if budget is None else budget
    return max(1, int(budget // max(row * max(n_examples, 1), 1)))


def single_edge_outputs(rt, acts: torch.Tensor, ablated: torch.Tensor, edges: Sequence[int],
                        budget: float | None = None) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
    """The model's outputs with each edge in ``edges`` (indices into ``rt.graph.edges``) ablated
    alone: yields ``(positions in edges, outputs [e, B, P, V])`` batch by batch.

    ``acts``: the clean node outputs ``[F, B, P, D]`` (``rt.node_outputs``); ``ablated``: the
    ablated ones, broadcastable to them (``rt.ablated_outputs``)."""
    for rows, out, _ in single_edge_effects(rt, acts, ablated, edges, budget):
        yield rows, out


@torch.no_grad()
def single_edge_effects(rt, acts: torch.Tensor, ablated: torch.Tensor, edges: Sequence[int],
                        budget: float | None = None) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """:func:`single_edge_outputs` plus, per edge, the largest change of its destination's own
    output (a head's result, an MLP's output, the logits; over every example and position):
    yields ``(positions in edges, outputs [e, B, P, V], destination change [e])``. A q or k edge
    into a head whose attention does not move changes its destination by rounding only."""
    g = rt.graph
    F, B, P, D = acts.shape
    H, L = rt.n_heads, rt.n_layers
    per = edges_per_pass(rt, B, P, budget)
    X = rt.destination_inputs(acts)  # [K, B, P, D] every destination's clean input (the residual there)
    abl = ablated.expand_as(acts)
    src = g.edge_forward[np.asarray(edges, dtype=np.int64)].tolist()
    dst = g.edge_backward[np.asarray(edges, dtype=np.int64)].tolist()
    node_of = [g.backward_slots[k][0] for k in range(rt.n_backward)]
    order = np.argsort(np.asarray(dst), kind="stable")  # edges into one node together
    groups: list[list[int]] = []
    for i in order.tolist():
        if groups and node_of[dst[groups[-1][0]]] == node_of[dst[i]] and len(groups[-1]) < per:
            groups[-1].append(i)
        else:
            groups.append([i])

    def resid_at(layer: int) -> torch.Tensor:  # the clean residual entering ``layer`` (L: the logits' input)
        return X[layer * rt.per_layer_bwd] if layer < L else X[-1]

    future = future_mask(rt, P, acts.device) if rt.causal else None

    def attn_out_of(lyr: int, resid: torch.Tensor) -> torch.Tensor:
        """Layer ``lyr``'s attention output (every head, b_O included) on the residual ``[R, P, D]``:
        the q/k/v projections fused (as the clean pass), the heads' results summed in one product."""
        blk = rt.model.blocks[lyr]
        attn = blk.attn
        R = resid.shape[0]
        qkv = project_qkv(rt, lyr, blk.ln1(resid))
        dh = qkv.shape[-1]
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [R, H, P, dh]
        scores = q @ k.transpose(-1, -2) / attn.attn_scale
        if future is not None:
            scores = scores.masked_fill(future, float(attn.IGNORE))
        pattern = torch.softmax(scores, dim=-1)
        z = (pattern @ v).transpose(1, 2).reshape(R * P, H * dh)
        return torch.addmm(attn.b_O, z, attn.W_O.reshape(H * dh, D)).view(R, P, D)

    def forward_from(layer: int, resid: torch.Tensor) -> torch.Tensor:
        """The unpatched forward of layers ``layer``.. from the residual ``[R, P, D]``."""
        for lyr in range(layer, L):
            attn_out = attn_out_of(lyr, resid)
            if rt.has_mlp:
                m = mlp(rt, lyr, resid if rt.parallel else resid + attn_out)
                resid = resid + attn_out + m
            else:
                resid = resid + attn_out
        return unembed(rt, resid)

    for rows in groups:
        e = len(rows)
        s_rows = torch.as_tensor([src[i] for i in rows], device=acts.device)
        d_in = abl[s_rows] - acts[s_rows]  # [e, B, P, D] the change in the destination's input
        node = g.node(node_of[dst[rows[0]]])
        if node.kind == "logits":
            out = unembed(rt, X[-1] + d_in)
            yield np.asarray(rows), out, (out - unembed(rt, X[-1])).abs().flatten(1).amax(1)
            continue
        layer = node.layer
        fx = g.forward_index(node.name)
        if node.kind == "head":
            h = node.head
            slots = [layer * rt.per_layer_bwd + i * H + h for i in range(3)]  # its q, k, v inputs
            x = X[slots].unsqueeze(0).repeat(e, 1, 1, 1, 1)  # [e, 3, B, P, D]
            which = torch.as_tensor([slots.index(dst[i]) for i in rows], device=acts.device)
            x[torch.arange(e), which] += d_in
            x = x.permute(0, 2, 3, 1, 4).reshape(e * B, P, 3, D)
            delta = attention(rt, layer, x, heads=torch.tensor([h], device=acts.device))[0] - acts[fx].repeat(e, 1, 1)
            moved = delta.reshape(e, -1).abs().amax(1)
            if rt.has_mlp and not rt.parallel:  # the MLP of the same layer reads the head
                f_mlp = 1 + layer * rt.per_layer_fwd + H
                mlp_in = X[layer * rt.per_layer_bwd + 3 * H].repeat(e, 1, 1) + delta
                delta = delta + (mlp(rt, layer, mlp_in) - acts[f_mlp].repeat(e, 1, 1))
        else:  # an MLP
            new = mlp(rt, layer, (X[dst[rows[0]]] + d_in).reshape(e * B, P, D))
            delta = new - acts[fx].repeat(e, 1, 1)
            moved = delta.reshape(e, -1).abs().amax(1)
        out = forward_from(layer + 1, resid_at(layer + 1).repeat(e, 1, 1) + delta)
        yield np.asarray(rows), out.reshape(e, B, P, -1), moved
