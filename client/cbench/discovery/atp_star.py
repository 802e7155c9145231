"""AtP* (Kramár, Lieberum, Shah, Nanda 2024, arXiv 2403.00745): attribution patching with the
QK fix and GradDrop, per edge.

Edge scores with EAP's conventions (:mod:`cbench.discovery.eap`): the loss is a mean over
examples, ``a`` the clean and ``a'`` the ablated node outputs on the base input, and a score
estimates the loss increase when the edge alone is ablated (the edge's source output replaced by
its ablated value in that destination's input only). Per example ``x`` and edge ``e = u -> v``:

* **AtP** (the paper's eq. 4, EAP per edge): ``I(e; x) = -(a_u - a'_u) . dL_x / d input_v`` at the
  clean point, summed over positions.
* **QK fix** (the paper's section 3.1.1, eqs. 7-10): for ``v`` a head's query or key input, the
  attention pattern is not linearised through the softmax. The head's pattern is recomputed
  exactly with that input patched, ``input_v - (a_u - a'_u)`` (through ln1, W_Q/W_K and the
  causal softmax; the other of q/k clean), and only the step from the probabilities on is
  linear: ``I(e; x) = sum_{q,k} (A_patched - A_clean)[q, k] . dL_x / dA[q, k]`` for that head,
  with ``dL/dA`` the gradient w.r.t. the head's attention probabilities at the clean point.
  Edges into v inputs, MLP inputs and the logits keep the AtP estimate.
* **GradDrop** (the paper's section 3.1.2, eq. 11): ``I_l(e; x)`` is the estimate above with
  the gradient flowing back through layer ``l``'s residual contribution (its attention output and
  its MLP output, the block's writes to the residual stream) set to zero -- the forward pass is
  unchanged. The paper combines the L estimates by absolute value,
  ``c(n) = E_x[ 1/(L-1) sum_{l=1..L} |I_l(n; x)| ]`` (eq. 11; also koayon/atp_star's
  ``atp.py``). The term of the node's own layer is 0 (its output's gradient is dropped), which is
  what the 1/(L-1) counts. Per edge: the mean of ``|I_l(e; x)|`` over the layers ``l`` other
  than the destination's, i.e. exactly eq. 11 for a destination in a layer, and the mean over
  all L layers for edges into the logits (which no drop zeroes); with one layer (nothing else to
  drop) ``|I(e; x)|``. The score is that mean over examples: **non-negative** (GradDrop has no
  sign), ranked like every score by ``|score|``.

``grad_drop=False`` gives AtP with the QK fix only, signed exactly as EAP (the mean over examples
of ``I(e; x)``): on edges into v, MLP and logits inputs it equals EAP's score.

One pass per chunk of examples: the base rows are repeated L + 1 times (no drop, then layer l
dropped: its outputs enter the residual stream as ``out * 1 + out.detach() * 0`` in the other
rows and the reverse in its own, identical values forward), and one backward gives every
destination's input gradient and every head's ``dL/dA`` for every variant. The recomputed patterns
are batched over sources and heads per layer; rows and sources per pass stay within
``CBENCH_MEMORY_MB`` (:mod:`cbench.runtime.memory`). Cost: about (L + 1) x EAP's gradient pass,
plus one recomputed attention pattern per (source, q/k destination) and example.

The pass is the runtime's residual-stream pass written out here (the runtime has no gradient
w.r.t. attention probabilities or dropped layers): it reads the model through the runtime's
layers, fused q/k/v weights and layer-norm VJP, as :func:`CircuitRuntime.input_gradients` does.
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.errors import UsageError
from cbench.runtime.attention_ops import cap_scores, future_mask, rotate
from cbench.runtime.layer_norm import ln_kind, projected_ln_vjp
from cbench.runtime.layers import mlp as mlp_layer
from cbench.runtime.layers import post_attention
from cbench.runtime.memory import budget_bytes, row_parts, rows_per_pass
from cbench.runtime.weights import add_qk_position, project_qkv, qkv_weights
from cbench.tasks.metrics import metric_slice

PARAMS = {
    "batch_size": Param(int, 512, low=1, doc="examples per forward/backward pass (at most; fewer when a pass "
                                               "of examples x (n_layers + 1) rows would exceed CBENCH_MEMORY_MB)"),
    "grad_drop": Param(bool, True, doc="GradDrop (eq. 11): mean over dropped layers of |estimate| (scores >= 0); "
                                       "false: signed AtP with the QK fix"),
    "qk_fix": Param(bool, True, doc="recompute the attention pattern exactly for edges into q and k inputs"),
    "ablation": COMMON_PARAMS["ablation"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
}


def _drop(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``x`` with its gradient kept on rows where ``keep`` is 1 and dropped where it is 0 (the
    same values forward: ``x * 1 + 0`` and ``0 + x``)."""
    return x * keep + x.detach() * (1.0 - keep)


def gradient_pass(rt, tokens: torch.Tensor, metric_fn, variants: int):
    """One forward and backward pass over ``variants`` copies of ``tokens [n, P]``: copy 0 is the
    model, copy ``l + 1`` has the gradient through layer ``l``'s residual contribution dropped.
    ``metric_fn(out [V, n, P, V_out]) -> scalar`` (summed over copies). Returns ``(grads
    [n_backward, V, n, P, D]`` (d metric / d input of every destination), ``pattern_grads``
    (per layer ``[V, n, H, P, P]``, d metric / d attention probabilities), ``resids`` (per
    layer the clean input of its heads ``[n, P, D]``))."""
    n, P = tokens.shape
    H, D, L = rt.n_heads, rt.d_model, rt.n_layers
    V = variants
    R = V * n
    keep = None
    if V > 1:
        keep = torch.ones(L, R, 1, 1, dtype=rt.dtype, device=rt.device)
        for layer in range(min(L, V - 1)):
            keep[layer, (layer + 1) * n:(layer + 2) * n] = 0.0
    unembed = rt.unembed_fn()
    targets, patterns, resids = [], [], []
    with torch.enable_grad():
        resid = rt._embed(tokens).detach().repeat(V, 1, 1).requires_grad_(True)  # [R, P, D]
        for layer in range(L):
            blk = rt.model.blocks[layer]
            attn = blk.attn
            resids.append(resid[:n].detach())
            qkv = project_qkv(rt, layer, blk.ln1(resid).view(R, P, D))
            targets.append(qkv)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # [R, H, P, dh]
            q, k = rotate(rt, layer, q), rotate(rt, layer, k)
            scores = cap_scores(rt, q @ k.transpose(-1, -2) / attn.attn_scale)
            future = future_mask(rt, P, rt.device, layer) if rt.causal else None
            if future is not None:
                scores = torch.where(future, attn.IGNORE.to(scores.device), scores)
            pattern = torch.softmax(scores, dim=-1)
            patterns.append(pattern)
            z = pattern @ v
            attn_out = post_attention(rt, layer, torch.addmm(attn.b_O, z.transpose(1, 2).reshape(R * P, -1),
                                                             attn.W_O.reshape(-1, D)).view(R, P, D))
            if keep is not None:
                attn_out = _drop(attn_out, keep[layer])
            if rt.has_mlp:
                mlp_in = resid.view(R, P, D) if rt.parallel else resid + attn_out  # its own tensor
                targets.append(mlp_in)
                mlp_out = mlp_layer(rt, layer, mlp_in)
                if keep is not None:
                    mlp_out = _drop(mlp_out, keep[layer])
                resid = resid + attn_out + mlp_out
            else:
                resid = resid + attn_out
        resid = resid.view(R, P, D)
        targets.append(resid)
        out = unembed(resid)
        value = metric_fn(out.view(V, n, *out.shape[1:]))
        grads = torch.autograd.grad(value, targets + patterns)
    with torch.no_grad():
        result = torch.empty(rt.n_backward, V, n, P, D, dtype=rt.dtype, device=rt.device)
        k, gi = 0, 0
        for layer in range(L):
            blk = rt.model.blocks[layer]
            _W, _b, w_rows = qkv_weights(rt, layer)
            gq = grads[gi]
            gi += 1
            g3 = gq.reshape(R * P, 3 * H, -1).transpose(0, 1)  # [3H, R*P, dh], q of every head, then k, v
            ln_in = resids[layer].repeat(V, 1, 1).reshape(-1, D)
            result[k:k + 3 * H] = projected_ln_vjp(blk.ln1, ln_in, g3, w_rows).view(3 * H, V, n, P, D)
            k += 3 * H
            if rt.has_mlp:
                result[k] = grads[gi].view(V, n, P, D)
                k += 1
                gi += 1
        result[k] = grads[gi].view(V, n, P, D)
        pattern_grads = [g.view(V, n, H, P, P) for g in grads[gi + 1:]]
    return result, pattern_grads, resids


def patched_pattern_effects(rt, layer: int, resid: torch.Tensor, diff: torch.Tensor, pattern_grads: torch.Tensor,
                            max_sources: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The QK fix of layer ``layer``: for every source ``u`` (rows of ``diff [S, n, P, D]``, clean
    minus ablated outputs) and head ``h``, ``sum_{q,k} (A_patched - A_clean) * G`` where the
    pattern is recomputed with ``resid - diff[u]`` (``resid [n, P, D]``, the heads' clean input) as
    head ``h``'s query input (first result) or key input (second), and ``G = pattern_grads [V, n,
    H, P, P]``. Returns two ``[V, S, n, H]`` tensors."""
    blk = rt.model.blocks[layer]
    attn = blk.attn
    S, n, P, D = diff.shape
    H = rt.n_heads
    V = pattern_grads.shape[0]
    future = future_mask(rt, P, rt.device, layer) if rt.causal else None
    W_Q, W_K, b_Q, b_K = attn.W_Q.detach(), attn.W_K.detach(), attn.b_Q.detach(), attn.b_K.detach()

    def pattern(q, k):
        scores = cap_scores(rt, rotate(rt, layer, q) @ rotate(rt, layer, k).transpose(-1, -2) / attn.attn_scale)
        if future is not None:
            scores = torch.where(future, attn.IGNORE.to(scores.device), scores)
        return torch.softmax(scores, dim=-1)

    out_q = torch.empty(V, S, n, H, dtype=rt.dtype, device=rt.device)
    out_k = torch.empty_like(out_q)
    dh = W_Q.shape[-1]
    if max_sources is None:  # per source row: the patched input and its norm, q, k, two patterns and their differences
        per = n * (2 * P * D + 2 * H * P * dh + 6 * H * P * P) * rt.dtype.itemsize
        max_sources = max(1, int(budget_bytes() // max(per, 1)) - 1)
    for s0, s1 in row_parts(S, max_sources):
        x = torch.cat([resid[None], resid[None] - diff[s0:s1]], 0)  # row 0: unpatched (the same arithmetic)
        y = add_qk_position(rt, blk.ln1(x))  # a shortformer's queries and keys
        q = torch.einsum("snpd,hde->snhpe", y, W_Q) + b_Q[:, None]
        k = torch.einsum("snpd,hde->snhpe", y, W_K) + b_K[:, None]
        a_q = pattern(q, k[:1])  # query patched, keys clean [1 + s, n, H, P, P]
        a_k = pattern(q[:1], k)  # keys patched, query clean
        out_q[:, s0:s1] = torch.einsum("snhqk,vnhqk->vsnh", a_q[1:] - a_q[:1], pattern_grads)
        out_k[:, s0:s1] = torch.einsum("snhqk,vnhqk->vsnh", a_k[1:] - a_k[:1], pattern_grads)
    return out_q, out_k


def drop_weights(rt, variants: int) -> torch.Tensor:
    """``[V, n_backward]``: how each variant's |estimate| enters a destination's GradDrop score (eq. 11:
    the mean over the dropped layers other than the destination's own; one layer: the undropped estimate)."""
    L = rt.n_layers
    w = torch.zeros(variants, rt.n_backward, dtype=rt.dtype, device=rt.device)
    for k in range(rt.n_backward):
        own = min(k // rt.per_layer_bwd, L)  # the logits: L (no layer of its own)
        others = [layer for layer in range(L) if layer != own]
        if variants == 1 or not others:
            w[0, k] = 1.0
        else:
            for layer in others:
                w[layer + 1, k] = 1.0 / len(others)
    return w


def run(ctx: Context, batch_size: int, grad_drop: bool = True, qk_fix: bool = True, ablation: str = "resample",
        top_n=None, rel_threshold=0.05, **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    if ln_kind(rt) is None:
        raise UsageError("atp-star needs one supported norm throughout the model "
                         "(LayerNorm, LayerNormPre, RMSNorm, RMSNormPre or none)")
    g = ctx.graph
    N = ctx.data.n_examples
    F, K, L, H = g.n_forward, g.n_backward, rt.n_layers, rt.n_heads
    V = L + 1 if grad_drop else 1
    P = rt.tokens_tensor(ctx.data.base[:1]).shape[1]
    # rows per pass: V copies of each example; plus the per-example edge matrices [V, n, F, K]
    per_example = max(1, rows_per_pass(rt, P) // V)
    per_example = min(per_example, max(1, int(budget_bytes() // max(3 * V * F * K * rt.dtype.itemsize, 1))))
    chunks = row_parts(N, min(batch_size, per_example))
    weights = drop_weights(rt, V)
    total = torch.zeros(F, K, dtype=rt.dtype, device=rt.device)
    clean_acts = ctx.clean_acts
    bar = progress_bar(len(chunks), "atp-star", ctx.progress)
    for s, e in chunks:
        n = e - s
        tokens = rt.tokens_tensor(ctx.data.base[s:e])
        abl = ctx.ablated if ctx.ablated.shape[1] == 1 else ctx.ablated[:, s:e]
        diff = (clean_acts[:, s:e] - abl).expand(F, n, P, -1)  # [F, n, P, D]
        m = metric_slice(ctx.metric, s, e)

        def metric_fn(out, m=m):
            if ctx.reference_is_clean:  # as EAP: the clean point of this pass is the reference
                return m.same_pass(out, out).sum()  # every copy has the clean values
            return m(out).sum()

        grads, pattern_grads, resids = gradient_pass(rt, tokens, metric_fn, V)
        with torch.no_grad():
            # per example and variant: -(a_u - a'_u) . d L_x / d input_v (the metric is a mean over n)
            d = diff.permute(1, 0, 2, 3).reshape(n, F, -1)  # [n, F, P*D]
            mat = torch.stack([torch.bmm(d, grads[:, vi].permute(1, 2, 3, 0).reshape(n, -1, K))
                               for vi in range(V)]) * (-float(n))  # [V, n, F, K]
            if qk_fix:
                for layer in range(L):
                    S = 1 + layer * rt.per_layer_fwd
                    eq, ek = patched_pattern_effects(rt, layer, resids[layer], diff[:S], pattern_grads[layer])
                    col = layer * rt.per_layer_bwd
                    # [V, S, n, H] -> [V, n, S, H] into the q and k columns of this layer's heads
                    mat[:, :, :S, col:col + H] = eq.permute(0, 2, 1, 3) * float(n)
                    mat[:, :, :S, col + H:col + 2 * H] = ek.permute(0, 2, 1, 3) * float(n)
            if grad_drop:
                total += (mat.abs() * weights[:, None, None, :]).sum((0, 1)) / N
            else:
                total += mat[0].sum(0) / N
        bar.update(1)
    bar.close()
    scores = g.from_matrix(total)
    params = {"batch_size": batch_size, "grad_drop": grad_drop, "qk_fix": qk_fix, "ablation": ablation,
              "top_n": top_n, "rel_threshold": rel_threshold}
    from cbench.discovery.eap import _reference

    return finish(ctx, "atp-star", params, scores, None, t0, extra={"metric_reference": _reference(ctx)})
