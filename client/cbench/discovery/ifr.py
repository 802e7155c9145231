"""IFR: information flow routes (Ferrando & Voita 2024), as MIB adapts it (appendix E.2, eq. 5).

For a destination v with input a_v (its residual-stream input on the clean run, biases
included: what its layer norm reads) and sources U with outputs a_u::

    prox(u, v) = max(||a_v||_1 - ||a_u - a_v||_1, 0)
    imp(u, v)  = prox(u, v) / sum_{u' in U} prox(u', v)        (0 when the sum is 0)

computed at every example and position (IFR is a per-token method), then averaged over the
examples and the valid positions of the metric (those the task is scored at; BOS excluded).
One clean forward pass: IFR is neither counterfactual nor causal, so it takes no ablation.
A head's q, k and v inputs are the same residual stream on the clean run, so its three edges
from one source get the same score.

The scores into each destination sum to 1, so ranking all edges at once (top-n) mixes
incomparable scales: MIB builds IFR circuits by greedy search from the logits
(:func:`cbench.graph.circuits.greedy_order`); this method's registry entry says so, and
``cbench evaluate`` uses it for CPR and CMD. ``in_graph``: the greedy circuit with as many
edges as ``top_n`` (or, by default, as the ``rel_threshold`` rule would keep).

``protocol="mib"``: as MIB's reference code (EAP-IG branch MIB,
``attribute.py::get_scores_information_flow_routes``) computes it: the importance is averaged
over **every real token of each prompt, BOS included** (padding excluded; per prompt, then over
prompts), and the ``input`` node's output is the **token embedding without the positional
embedding** (``hook_embed``), while each destination's input is the whole residual stream.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from cbench.graph.circuits import greedy_circuit
from cbench.discovery.base import COMMON_PARAMS, Context, Param, circuit_from_scores, finish
from cbench.runtime.memory import rows_per_pass

PARAMS = {
    "batch_size": Param(int, 256, low=1, doc="examples per chunk"),
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
    "protocol": COMMON_PARAMS["protocol"],
}


def importance(rt, acts: torch.Tensor, weights: torch.Tensor, input_out: torch.Tensor | None = None) -> torch.Tensor:
    """``[F, K]`` sums over (b, p) of ``weights[b, p] * imp(f, k)`` for node outputs ``acts``
    ``[F, B, P, D]`` (0 where f -> k is not an edge); ``input_out`` ``[B, P, D]``: the ``input``
    node's output as a source (MIB: the token embedding alone), the destinations' inputs still
    from ``acts``."""
    inputs = rt.destination_inputs(acts)  # [K, B, P, D]
    if input_out is not None:
        acts = torch.cat([input_out[None], acts[1:]])
    real = rt._real  # [F, K]
    norm_v = inputs.abs().sum(-1)  # [K, B, P]
    out = torch.zeros(real.shape, dtype=acts.dtype, device=acts.device)
    for k in range(inputs.shape[0]):
        srcs = torch.nonzero(real[:, k]).flatten()
        dist = (acts[srcs] - inputs[k]).abs().sum(-1)  # [S, B, P]
        prox = (norm_v[k] - dist).clamp(min=0.0)
        total = prox.sum(0, keepdim=True)
        imp = torch.where(total > 0, prox / torch.where(total > 0, total, torch.ones_like(total)),
                          torch.zeros_like(prox))
        out[srcs, k] = (imp * weights).sum((1, 2))
    return out


def real_tokens(rt, tokens: torch.Tensor) -> torch.Tensor:
    """``[B, P]`` bool: the positions that are not padding (the model's pad token, when it has one)."""
    meta = getattr(getattr(rt, "artifact", None), "meta", None) or {}
    vocab, pad = meta.get("input_tokens"), meta.get("pad_token")
    if isinstance(vocab, list) and pad in vocab:
        return tokens != vocab.index(pad)
    return torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)


def mib_weights(rt, tokens: torch.Tensor) -> torch.Tensor:
    """MIB's position weights: 1 / (the prompt's real length) at its real tokens, BOS included."""
    real = real_tokens(rt, tokens).to(rt.dtype)
    return real / real.sum(1, keepdim=True).clamp(min=1.0)


def run(ctx: Context, batch_size: int, top_n=None, rel_threshold=0.05, protocol: str = "cbench", **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    g = ctx.graph
    N = ctx.data.n_examples
    valid = ctx.metric.valid.to(rt.dtype)  # [N, P]: the positions the task is scored at
    n_valid = float(valid.sum())
    if n_valid == 0:
        valid = torch.ones_like(valid)
        n_valid = float(valid.numel())
    mat = torch.zeros(g.n_forward, g.n_backward, dtype=rt.dtype, device=rt.device)
    per = min(batch_size, rows_per_pass(rt, ctx.clean_acts.shape[2]))  # bounded memory per chunk
    mib = protocol == "mib"
    if mib:
        tokens = rt.tokens_tensor(ctx.data.base)
        valid, n_valid = mib_weights(rt, tokens), float(N)
    with torch.no_grad():
        for s in range(0, N, per):
            e = min(N, s + per)
            tok_embed = rt.model.embed(tokens[s:e]) if mib else None
            mat += importance(rt, ctx.clean_acts[:, s:e], valid[s:e], tok_embed)
    scores = (g.from_matrix(mat) / n_valid).double().cpu().numpy()
    n = top_n if top_n is not None else int(circuit_from_scores(scores, None, rel_threshold).sum())
    in_graph = greedy_circuit(g, scores, n, absolute=False)
    params = {"batch_size": batch_size, "top_n": top_n, "rel_threshold": rel_threshold,
              "protocol": "mib" if mib else None}
    extra = {"protocol": "mib: MIB's code (every real token incl. BOS; input node = token embedding without "
                         "positions); the paper averages the positions the task is scored at"} if mib else None
    return finish(ctx, "ifr", params, scores, in_graph, t0, extra=extra)
