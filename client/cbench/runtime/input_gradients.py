"""Input gradients: d metric / d input of every destination (EAP, EAP-IG), without
materialising per-head inputs on the fast path (probes on the fused q/k/v projections mapped
back through W_Q/W_K/W_V and the layer norm), and edge scores from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from cbench.errors import UsageError
from cbench.runtime.ablations import ablated_outputs
from cbench.runtime.layer_norm import ln_kind, projected_ln_vjp
from cbench.runtime.attention_ops import cap_scores, future_mask, rotate
from cbench.runtime.layers import add_mlp, embed, mlp, post_attention, post_heads, unembed
from cbench.runtime.masked_forward import run
from cbench.runtime.masks import interpolate_input, mix_node_outputs, node_mask_tensor, tokens_tensor
from cbench.runtime.weights import project_qkv, qkv_weights

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState


def input_gradients(rt: ModelState, base, metric_fn: Callable[[torch.Tensor], torch.Tensor], source=None,
                    edge_mask=None, node_mask=None, ablation: str = "resample", reference=None,
                    positional: bool = True, ablated: torch.Tensor | None = None,
                    input_interpolation=None, sum_steps: tuple[int, int] | None = None,
                    first_block_acts: bool = False, shared_first: bool = False):
    """``(d metric / d input of every destination [n_backward, B, P, D], metric value)``.

    ``first_block_acts=True`` (node masks only, no edge mask): also return, third, every
    node's output ``[n_forward, B/C, P, D]`` on the first block of rows (those the first
    node-mask row applies to), e.g. the alpha = 0 rows of EAP-IG-inputs, which are the run
    on the source inputs; ``ablated`` then only needs its ``input`` row.

    ``shared_first=True``: position 0 is computed once when it is the same in every row (causal
    attention, one token there, only ``input`` interpolated, see ``fast_input_gradients``); the
    gradients at position 0 are then zeros, for callers whose differences there are zero.

    ``sum_steps=(G, Z)``: the rows are G x Z blocks of B/(G Z) examples (e.g. groups and
    integrated-gradient steps); the gradients are summed over Z, giving ``[K, G * B/(G Z), P, D]``.

    Without an edge mask this runs the residual-stream pass with probes on the q/k/v
    projections, the MLP inputs and the final residual, and maps the q/k/v gradients back to
    each head's input through W_Q/W_K/W_V and the layer norm's vector-Jacobian product, so
    per-head inputs are never materialised. With an edge mask (or an unsupported norm) it adds
    a probe to every destination input of the masked pass."""
    tokens = tokens_tensor(rt, base)
    fast = edge_mask is None and ln_kind(rt) is not None
    if fast:
        B = tokens.shape[0]
        nm = node_mask_tensor(rt, node_mask, B)
        if input_interpolation is not None:
            nm = interpolate_input(rt, nm, input_interpolation)
        if nm is not None and ablated is None:
            ablated = ablated_outputs(rt, tokens, source, ablation, reference, positional)
        with torch.enable_grad():
            return fast_input_gradients(rt, tokens, nm, ablated, metric_fn, sum_steps, first_block_acts,
                                        shared_first)
    if first_block_acts:
        raise UsageError("first_block_acts needs the residual-stream pass (no edge mask, a supported norm)")
    with torch.enable_grad():
        res = run(rt, tokens, source, edge_mask, node_mask, ablation, reference, positional, ablated,
                  input_probe=True, input_interpolation=input_interpolation)
        value = metric_fn(res.output)
        (grad,) = torch.autograd.grad(value, res.probe)
    if sum_steps is not None:
        G, Z = sum_steps
        grad = grad.reshape(grad.shape[0], G, Z, -1, *grad.shape[2:]).sum(2).flatten(1, 2)
    return grad, float(value.detach())


def fast_input_gradients(rt: ModelState, tokens, nm, ablated, metric_fn, sum_steps=None,
                         first_block_acts=False, shared_first: bool = False):
    """Forward with the q/k/v projections fused in one matrix product per layer, then one
    backward for the gradients at the projections, MLP inputs and final residual (taken on
    those intermediate tensors directly), mapped back to each head's q/k/v input.

    ``shared_first``: when attention is causal, every row has the same token at position 0
    and only the ``input`` node is interpolated, with the same value at position 0 in every
    row, position 0 computes the same thing in every row: it is run once, without gradient,
    and the rows carry positions 1.. only (its keys and values are shared). The gradients at
    position 0 are then returned as zeros: for callers (EAP-IG-inputs) whose clean and
    ablated outputs are equal there, so those gradients are multiplied by zero anyway."""
    B, P = tokens.shape
    H, D = rt.n_heads, rt.d_model
    if nm is not None and nm.dim() == 1:
        nm = nm[None]
    C = 1 if nm is None else nm.shape[0]
    n = B // C
    emb = embed(rt, tokens)
    if shared_first:
        shared_first = first_position_shared(rt, tokens, emb, nm, ablated)
    o = 1 if shared_first else 0  # positions computed in the rows: o .. P-1
    Pm = P - o
    abl = ablated
    if o and ablated is not None and ablated.shape[2] == P:
        abl = ablated[:, :, o:]

    def needs(f0, f1):
        return nm is not None and (nm[:, f0:f1].requires_grad or not bool((nm[:, f0:f1] == 1).all()))

    first = first_position(rt, emb[:1, :1].detach()) if o else None
    targets, resids = [], []
    block = [] if first_block_acts else None  # node outputs on rows 0 .. n-1

    def keep_block(x):  # [k, n, Pm, D] -> with position 0 in front
        if o:
            x = torch.cat([first["acts"][len(block)].expand(x.shape[0], n, 1, D), x], 2)
        block.append(x)

    if not emb.requires_grad:  # a frozen model: the gradients still need a graph
        emb = emb.detach().requires_grad_(True)
    resid = mix_node_outputs(emb[:, o:, None], nm, abl, 0, 1)[:, :, 0]
    if block is not None:
        keep_block(resid[:n].detach()[None])
    f = 1
    for layer in range(rt.n_layers):
        future = future_mask(rt, P, emb.device, layer)[o:] if rt.causal else None
        blk = rt.model.blocks[layer]
        attn = blk.attn
        resids.append(resid.detach())
        qkv = project_qkv(rt, layer, blk.ln1(resid), start=o)
        d_head = qkv.shape[-1]
        targets.append(qkv)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [B, H, Pm, dh]
        q, k = rotate(rt, layer, q, start=o), rotate(rt, layer, k, start=o)
        if o:
            k0, v0 = first["kv"][layer]
            k = torch.cat([k0.expand(B, H, o, d_head), k], 2)
            v = torch.cat([v0.expand(B, H, o, d_head), v], 2)
        scores = cap_scores(rt, q @ k.transpose(-1, -2) / attn.attn_scale)  # [B, H, Pm, P]
        if future is not None:
            scores = torch.where(future, attn.IGNORE.to(scores.device), scores)
        if P < 8 and future is not None:  # short rows: the fused kernel is slow (no row is all-masked)
            e = (scores - scores.detach().amax(-1, keepdim=True)).exp()
            pattern = e / e.sum(-1, keepdim=True)
        else:
            pattern = torch.softmax(scores, dim=-1)
            pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        z = pattern @ v  # [B, H, Pm, dh]
        if needs(f, f + H):
            heads = post_heads(rt, layer, torch.einsum("bhpe,hed->bphd", z, attn.W_O), 2)
            heads = mix_node_outputs(heads, nm, abl, f, f + H)
            attn_out = heads.sum(2) + attn.b_O  # b_O is zero with a post-norm
            if block is not None:
                keep_block(heads[:n].detach().permute(2, 0, 1, 3))
        else:
            attn_out = torch.addmm(attn.b_O, z.transpose(1, 2).reshape(B * Pm, -1),
                                   attn.W_O.reshape(-1, D)).view(B, Pm, D)
            if block is not None:
                with torch.no_grad():
                    keep_block(post_heads(rt, layer, torch.einsum("nhpe,hed->hnpd", z[:n], attn.W_O)))
            attn_out = post_attention(rt, layer, attn_out)
        f += H
        if rt.has_mlp:
            mlp_in = resid.view(B, Pm, D) if rt.parallel else resid + attn_out  # its own tensor
            targets.append(mlp_in)
            mlp_out = mlp(rt, layer, mlp_in)
            if needs(f, f + 1):
                mlp_out = mix_node_outputs(mlp_out[:, :, None], nm, abl, f, f + 1)[:, :, 0]
            if block is not None:
                keep_block(mlp_out[:n].detach()[None])
            f += 1
            resid = resid + attn_out + mlp_out
        else:
            resid = resid + attn_out
    resid = resid.view(B, Pm, D)
    targets.append(resid)
    out = unembed(rt, resid)
    if o:
        out = torch.cat([first["out"].expand(B, o, -1), out], 1)
    value = metric_fn(out)
    grads = torch.autograd.grad(value, targets)

    def fold(t):  # [k, B, Pm, D] -> summed over integrated-gradient steps, position 0 back
        if sum_steps is not None:
            G, Z = sum_steps
            t = t.reshape(t.shape[0], G, Z, -1, Pm, D).sum(2).flatten(1, 2)
        if o:
            t = torch.cat([t.new_zeros(t.shape[0], t.shape[1], o, D), t], 2)
        return t

    # mapping the gradients back is arithmetic on them, not part of any graph: under no_grad (or
    # ln.w, a parameter, would tie every pass's temporaries to the caller's running sums), each
    # destination's rows written into one preallocated [n_backward, B', P, D] tensor
    with torch.no_grad():
        out_rows = B // sum_steps[1] if sum_steps is not None else B
        result = torch.empty(rt.n_backward, out_rows, P, D, dtype=grads[-1].dtype, device=grads[-1].device)
        k = 0

        def put(t):
            nonlocal k
            result[k:k + t.shape[0]] = t
            k += t.shape[0]

        gi = 0
        for layer in range(rt.n_layers):
            blk = rt.model.blocks[layer]
            _W, _b, w_rows = qkv_weights(rt, layer)
            gq = grads[gi]  # [B, Pm, 3, H, dh]
            gi += 1
            identity = type(blk.ln1).__name__ == "Identity"
            if identity and sum_steps is not None:
                G, Z = sum_steps
                gq = gq.reshape(G, Z, -1, Pm, 3, H, gq.shape[-1]).sum(1).flatten(0, 1)
            b_rows = gq.shape[0]
            g3 = gq.reshape(b_rows * Pm, 3 * H, -1).transpose(0, 1)  # [3H, b*Pm, dh]
            ln_in = resids[layer].reshape(-1, D)
            if identity and o:
                result[k:k + 3 * H, :, :o] = 0.0
                result[k:k + 3 * H, :, o:] = projected_ln_vjp(blk.ln1, ln_in, g3, w_rows).view(3 * H, b_rows, Pm, D)
                k += 3 * H
            elif identity or (sum_steps is None and not o):  # written in place
                projected_ln_vjp(blk.ln1, ln_in, g3, w_rows, out=result[k:k + 3 * H].view(3 * H, b_rows * Pm, D))
                k += 3 * H
            else:
                put(fold(projected_ln_vjp(blk.ln1, ln_in, g3, w_rows).view(3 * H, b_rows, Pm, D)))
            if rt.has_mlp:
                put(fold(grads[gi][None]))
                gi += 1
        put(fold(grads[gi][None]))
        grads = result
    if block is not None:
        return grads, float(value.detach()), torch.cat(block, 0)
    return grads, float(value.detach())


def first_position_shared(rt: ModelState, tokens, emb, nm, ablated) -> bool:
    """Whether position 0 is the same computation in every row (see ``fast_input_gradients``)."""
    if not rt.causal or tokens.shape[1] < 2 or not bool((tokens[:, 0] == tokens[0, 0]).all()):
        return False
    if nm is None:
        return True
    if nm.requires_grad or not bool((nm[:, 1:] == 1).all()) or ablated is None:
        return False
    return bool((ablated[0][..., :1, :] == emb[0, 0]).all())


@torch.no_grad()
def first_position(rt: ModelState, resid: torch.Tensor) -> dict:
    """Position 0 alone (``resid`` its input ``[1, 1, D]``), as ``fast_input_gradients`` computes it:
    per layer its key and value ``[1, H, 1, dh]``, every node's output there ``[k, 1, 1, D]``
    (input, heads, MLP, in forward order) and the model output ``[1, 1, V]``."""
    H, D = rt.n_heads, rt.d_model
    kv, acts = [], [resid[None]]
    for layer in range(rt.n_layers):
        blk = rt.model.blocks[layer]
        attn = blk.attn
        qkv = project_qkv(rt, layer, blk.ln1(resid).reshape(1, 1, D))
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        q, k = rotate(rt, layer, q), rotate(rt, layer, k)  # position 0: the identity, as the model
        kv.append((k, v))
        pattern = torch.softmax(cap_scores(rt, q @ k.transpose(-1, -2) / attn.attn_scale), dim=-1)
        z = pattern @ v
        acts.append(post_heads(rt, layer, torch.einsum("nhpe,hed->hnpd", z, attn.W_O)))
        attn_out = post_attention(rt, layer, torch.addmm(attn.b_O, z.transpose(1, 2).reshape(1, -1),
                                                         attn.W_O.reshape(-1, D)).view(1, 1, D))
        resid = add_mlp(rt, layer, resid, attn_out, acts)
    return {"kv": kv, "acts": acts, "out": unembed(rt, resid)}


def scores_from_input_gradients(rt: ModelState, diff: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Edge scores ``[n_edges]``: ``sum_{b,p} diff[src] . grads[dst]`` for every edge, where
    ``diff`` is ``[F, B, P, D]`` (e.g. clean minus ablated node outputs) and ``grads`` is
    ``[K, B, P, D]`` (from :func:`input_gradients`)."""
    d = diff.expand(-1, *grads.shape[1:]).reshape(diff.shape[0], -1)
    g = grads.reshape(grads.shape[0], -1)
    blocks = rt.graph.source_blocks
    if not blocks:
        return rt.graph.from_matrix(d @ g.T)
    # only the staircase of source/destination pairs that are edges (about half of the full product)
    mat = d.new_zeros(d.shape[0], g.shape[0])
    for n, first, stop in blocks:
        if n:
            mat[:n, first:stop] = d[:n] @ g[first:stop].T
    return rt.graph.from_matrix(mat)


def node_gradients(rt: ModelState, grads: torch.Tensor) -> torch.Tensor:
    """d metric / d output of every forward node ``[n_forward, B, P, D]`` from the gradients at
    every destination input ``grads [n_backward, B, P, D]`` (:func:`input_gradients`): a node's
    output enters each destination it has an edge to with coefficient 1, so its gradient is the
    sum of theirs (node attribution patching, NAP)."""
    K = grads.shape[0]
    return (rt._real @ grads.reshape(K, -1)).reshape(rt.n_forward, *grads.shape[1:])


def neuron_scores_from_input_gradients(rt: ModelState, diff: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Per-neuron attribution ``[n_forward, D]``: ``sum_{b,p} diff[f, b, p, d] * g[f, b, p, d]``
    where ``g`` is each node's output gradient (:func:`node_gradients`) and ``diff``
    ``[F, B|1, P|1, D]`` e.g. clean minus ablated outputs. Summed over ``d``: the node's score."""
    g = node_gradients(rt, grads)
    return (diff.expand(-1, *g.shape[1:]) * g).sum((1, 2))
