"""Subnetwork probing (Cao et al. 2021, as used by ACDC and InterpBench): learned hard-concrete
masks with an expected-L0 sparsity penalty, on nodes (``sp``) or on edges (``edge-sp``).

Each masked unit has a logit ``log_alpha``. A training step samples u ~ U(0, 1) per unit,
s = sigmoid((log u - log(1 - u) + log_alpha) / beta), z = clamp(s (zeta - gamma) + gamma, 0, 1)
(beta = 2/3, gamma = -0.1, zeta = 1.1), runs the model with mask z (ablated units take their
ablated value) and minimises ``loss + lambda_reg * mean_units P(z > 0)`` where
P(z > 0) = sigmoid(log_alpha - beta log(-gamma / zeta)). Adam, ``steps`` full-batch steps.

``sp`` masks every head and MLP (not ``input``); edge scores are ``min(log_alpha[src],
log_alpha[dst])`` (``input`` and ``logits`` count as always present), so an edge is in the
circuit iff both ends are (InterpBench appendix D). ``edge-sp`` masks every edge; its scores
are the edge logits. ``in_graph``: the deterministic mask clamp(sigmoid(log_alpha) (zeta -
gamma) + gamma, 0, 1) > 0.5.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar

BETA, GAMMA, ZETA = 2.0 / 3.0, -0.1, 1.1

PARAMS = {
    "lambda_reg": Param(float, 0.5, low=0.0, doc="weight of the sparsity penalty (mean expected L0)"),
    "lr": Param(float, 0.05, low=0.0, low_inclusive=False, high=10.0, doc="Adam learning rate"),
    "steps": Param(int, 300, low=1, high=1_000_000, doc="optimisation steps"),
    "init": Param(float, 3.0, low=-20.0, high=20.0, doc="initial mask logit"),
    "seed": COMMON_PARAMS["seed"],
    "ablation": COMMON_PARAMS["ablation"],
}


def _sample(log_alpha: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    u = torch.rand(log_alpha.shape, generator=gen, dtype=log_alpha.dtype).clamp(1e-6, 1 - 1e-6)
    s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / BETA)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def _deterministic(log_alpha: torch.Tensor) -> torch.Tensor:
    return (torch.sigmoid(log_alpha) * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def _train(ctx: Context, n_units: int, to_masks, lambda_reg, lr, steps, init, seed, desc):
    rt = ctx.runtime
    log_alpha = torch.full((n_units,), float(init), dtype=rt.dtype, requires_grad=True)
    opt = torch.optim.Adam([log_alpha], lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    shift = BETA * math.log(-GAMMA / ZETA)
    bar = progress_bar(steps, desc, ctx.progress)
    loss_v = float("nan")
    with torch.enable_grad():
        for _ in range(steps):
            z = _sample(log_alpha, gen)
            edge_mask, node_mask = to_masks(z)
            out = rt.run(ctx.data.base, edge_mask=edge_mask, node_mask=node_mask, ablated=ctx.ablated).output
            loss = ctx.metric(out)
            reg = torch.sigmoid(log_alpha - shift).mean()
            total = loss + lambda_reg * reg
            opt.zero_grad()
            total.backward()
            opt.step()
            loss_v = float(loss.detach())
            bar.update(1)
    bar.close()
    return log_alpha.detach(), loss_v


def run_nodes(ctx: Context, lambda_reg, lr, steps, init, seed=0, ablation="resample", **_):
    t0 = time.perf_counter()
    g = ctx.graph
    F = g.n_forward

    def to_masks(z):
        return None, torch.cat([torch.ones(1, dtype=z.dtype), z])  # input never masked

    log_alpha, loss_v = _train(ctx, F - 1, to_masks, lambda_reg, lr, steps, init, seed, "sp")
    la = np.concatenate([[np.inf], log_alpha.cpu().numpy().astype(np.float64)])  # per forward node
    keep = np.concatenate([[True], (_deterministic(log_alpha) > 0.5).cpu().numpy()])
    finite_max = float(np.max(la[1:])) + 1.0 if F > 1 else 1.0
    scores = np.empty(g.n_edges)
    in_graph = np.empty(g.n_edges, dtype=bool)
    for e in g.edges:
        src = la[e.forward]
        dst = np.inf if e.dst == "logits" else la[g.forward_index(e.dst)]
        s = min(src, dst)
        scores[e.index] = finite_max if not np.isfinite(s) else s
        dst_keep = True if e.dst == "logits" else keep[g.forward_index(e.dst)]
        in_graph[e.index] = keep[e.forward] and dst_keep
    node_scores = {n: float(la[i]) for i, n in enumerate(g.forward_nodes) if i > 0}
    params = {"lambda_reg": lambda_reg, "lr": lr, "steps": steps, "init": init, "seed": seed, "ablation": ablation}
    return finish(ctx, "sp", params, scores, in_graph, t0, node_scores=node_scores, extra={"final_loss": loss_v})


def run_edges(ctx: Context, lambda_reg, lr, steps, init, seed=0, ablation="resample", **_):
    t0 = time.perf_counter()
    g = ctx.graph
    log_alpha, loss_v = _train(ctx, g.n_edges, lambda z: (z, None), lambda_reg, lr, steps, init, seed, "edge-sp")
    in_graph = (_deterministic(log_alpha) > 0.5).cpu().numpy()
    params = {"lambda_reg": lambda_reg, "lr": lr, "steps": steps, "init": init, "seed": seed, "ablation": ablation}
    return finish(ctx, "edge-sp", params, log_alpha, in_graph, t0, extra={"final_loss": loss_v})
