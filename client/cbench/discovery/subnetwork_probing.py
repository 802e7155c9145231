"""Subnetwork probing (Cao et al. 2021, as used by ACDC and InterpBench): learned hard-concrete
masks with an expected-L0 sparsity penalty, on nodes (``sp``) or on edges (``edge-sp``).

Each masked unit has a logit ``log_alpha``. A training step samples u ~ U(0, 1) per unit,
s = sigmoid((log u - log(1 - u) + log_alpha) / beta), z = clamp(s (zeta - gamma) + gamma, 0, 1)
(beta = 2/3, gamma = -0.1, zeta = 1.1), runs the model with mask z (ablated units take their
ablated value) and minimises ``loss + lambda_reg * mean_units P(z > 0)`` where
P(z > 0) = sigmoid(log_alpha - beta log(-gamma / zeta)). Adam, ``steps`` steps, each on a
minibatch of ``batch_size`` pairs (the pairs are visited in a fresh random order every epoch;
``batch_size`` >= the number of pairs means full-batch steps). The ablated activations are
computed once, before training, and sliced per minibatch. Training runs on one torch thread, so
the same ``seed`` and data give the same scores to the bit whatever ``CBENCH_THREADS`` is.

``sp`` masks every head and MLP (not ``input``); edge scores are ``min(log_alpha[src],
log_alpha[dst])`` (``input`` and ``logits`` count as always present), so an edge is in the
circuit iff both ends are (InterpBench appendix D). ``edge-sp`` masks every edge; its scores
are the edge logits. ``in_graph``: the deterministic mask clamp(sigmoid(log_alpha) (zeta -
gamma) + gamma, 0, 1) > 0.5.

Defaults (lambda_reg 0.1, lr 0.05, steps 100, batch_size 32, init 1.0) were tuned on the 16 main
cases with 100 validation pairs (``cbench bench --cases main``), scoring edge AUROC of the mask
logits against the ground truth:

* Speed: a step costs one masked forward and backward pass; on these models its cost grows
  with the batch, down to a fixed overhead of a few ms, so 100 steps of 32 pairs take about a
  second per case and method on one CPU thread (the former 300 full-batch steps: 5-25 s).
* ``lambda_reg``: at the optimum a unit is pruned when its ablation costs less than
  ``lambda_reg / n_units`` in loss. With 0.5 (the former default) that bar is 0.25 on the
  one-layer Tracr cases (two units), above the KL of ablating a necessary MLP on case 26 (0.04),
  so longer training pruned it (AUROC 0.12); 150 steps also over-pruned real edges of cases 4
  and 18 for ``edge-sp``. Because Adam normalises each unit's step, a useless unit's logit falls
  at about ``lr`` per step whatever ``lambda_reg`` is, so a small ``lambda_reg`` still separates
  useless units from useful ones; 0.1 gave the best and most step-robust ``edge-sp`` mean (0.98
  at 100 and at 200 steps; 0.05: 0.96-0.97).
* ``init`` 1.0 (the former 3.0): a mask starting nearer the clamp boundary gets a non-zero
  loss gradient on more samples (z = 1 exactly has none), so fewer steps suffice.
* Mean edge AUROC with these defaults: ``edge-sp`` 0.98, ``sp`` 0.77. Node masks cannot do
  better than about 0.76 here: scoring the exact ground-truth nodes (circuit nodes 1, others -1)
  under the both-ends rule gives 0.76, because ``input -> logits`` always counts as present
  (0.75 on every one-layer Tracr case) and, where every node is in the circuit (cases 13, 19),
  the edges they carry cannot be told apart (0.06-0.38, depending on which node's logit ends
  higher).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.tasks.metrics import Metric, metric_slice
from cbench.runtime.memory import masked_grad_rows_per_pass, row_parts, rows_per_pass

BETA, GAMMA, ZETA = 2.0 / 3.0, -0.1, 1.1

PARAMS = {
    "lambda_reg": Param(float, 0.1, low=0.0, doc="weight of the sparsity penalty (mean expected L0)"),
    "lr": Param(float, 0.05, low=0.0, low_inclusive=False, high=10.0, doc="Adam learning rate"),
    "steps": Param(int, 100, low=1, high=1_000_000, doc="optimisation steps"),
    "batch_size": Param(int, 32, low=1, doc="pairs per step (>= the number of pairs: full batch)"),
    "init": Param(float, 1.0, low=-20.0, high=20.0, doc="initial mask logit"),
    "seed": COMMON_PARAMS["seed"],
    "ablation": COMMON_PARAMS["ablation"],
}


def _sample(log_alpha: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    u = torch.rand(log_alpha.shape, generator=gen, dtype=log_alpha.dtype).clamp(1e-6, 1 - 1e-6)
    s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / BETA)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def _deterministic(log_alpha: torch.Tensor) -> torch.Tensor:
    return (torch.sigmoid(log_alpha) * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def _batches(n: int, batch_size: int, gen: torch.Generator):
    """Index tensors of ``batch_size`` pairs, a fresh random order every epoch (forever);
    ``None`` (the whole set) when a batch would hold every pair."""
    if batch_size >= n:
        while True:
            yield None
    while True:
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i:i + batch_size]


def minibatch(idx, tokens, ablated, metric: Metric, per_example: bool):
    """``(tokens, ablated, metric)`` of the pairs ``idx`` (None: all of them); ``ablated`` has one
    row per pair when ``per_example`` (resample), else one row for every pair."""
    if idx is None:
        return tokens, ablated, metric
    abl = ablated[:, idx] if per_example else ablated
    return tokens[idx], abl, Metric(metric.name, metric.reference[idx], metric.valid[idx])


def backward_in_parts(rt, tokens: torch.Tensor, ablated: torch.Tensor, metric: Metric, run_part, inputs,
                      edge_masks: bool = True) -> float:
    """Backpropagate ``metric`` (a mean over the rows of ``tokens``) of the masked run
    ``run_part(tokens[s:e], ablated rows, s, e) -> outputs`` in parts of at most
    :func:`masked_grad_rows_per_pass` rows (node masks only, ``edge_masks=False``: the residual
    pass's :func:`rows_per_pass`), so one training step's memory stays within the budget
    whatever its batch; each part's loss is weighted by its share of the rows and the gradients
    add up in the leaves ``inputs`` (the masks being learned) and nowhere else: the model's own
    parameters get no gradient (computing theirs took a third of a step). Returns the loss value. One part (every default batch on the benchmark
    models): the same arithmetic as one pass."""
    n, P = tokens.shape
    per_row = ablated.shape[1] == n and n > 1
    parts = row_parts(n, (masked_grad_rows_per_pass if edge_masks else rows_per_pass)(rt, P))
    total = 0.0
    for s, e in parts:
        abl = ablated[:, s:e] if per_row else ablated
        if len(parts) == 1:
            loss = metric(run_part(tokens, abl, s, e))
        else:
            loss = metric_slice(metric, s, e)(run_part(tokens[s:e], abl, s, e)) * ((e - s) / n)
        loss.backward(inputs=list(inputs))
        total += float(loss.detach())
    return total


def _train(ctx: Context, n_units: int, to_masks, lambda_reg, lr, steps, init, seed, batch_size, desc):
    # one torch thread while training: a multi-threaded reduction rounds differently from a
    # single-threaded one, and 100 optimisation steps amplify that into other scores, so the
    # result would depend on CBENCH_THREADS (same seed, same data: the same scores to the bit)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_steps(ctx, n_units, to_masks, lambda_reg, lr, steps, init, seed, batch_size, desc)
    finally:
        torch.set_num_threads(threads)


def _train_steps(ctx: Context, n_units: int, to_masks, lambda_reg, lr, steps, init, seed, batch_size, desc):
    rt = ctx.runtime
    tokens = rt.tokens_tensor(ctx.data.base)
    n = tokens.shape[0]
    ablated, metric = ctx.ablated, ctx.metric
    per_example = ablated.shape[1] == n and n > 1  # resample: one row per pair; mean/zero: one row
    log_alpha = torch.full((n_units,), float(init), dtype=rt.dtype, requires_grad=True)
    opt = torch.optim.Adam([log_alpha], lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    shift = BETA * math.log(-GAMMA / ZETA)
    batches = _batches(n, int(batch_size), gen)
    bar = progress_bar(steps, desc, ctx.progress)
    loss_v = float("nan")
    with torch.enable_grad():
        for _ in range(steps):
            tok, abl, m = minibatch(next(batches), tokens, ablated, metric, per_example)
            z = _sample(log_alpha, gen)
            z_in = z.detach().requires_grad_(True)  # the parts' gradients gather here
            edge_mask, node_mask = to_masks(z_in)
            loss_v = backward_in_parts(rt, tok, abl, m, lambda t, a, s, e: rt.run(
                t, edge_mask=edge_mask, node_mask=node_mask, ablated=a).output, [z_in],
                edge_masks=edge_mask is not None)
            reg = torch.sigmoid(log_alpha - shift).mean()
            opt.zero_grad()
            ((z * z_in.grad).sum() + lambda_reg * reg).backward()
            opt.step()
            bar.update(1)
    bar.close()
    return log_alpha.detach(), loss_v


def _params(lambda_reg, lr, steps, batch_size, init, seed, ablation) -> dict:
    return {"lambda_reg": lambda_reg, "lr": lr, "steps": steps, "batch_size": batch_size, "init": init,
            "seed": seed, "ablation": ablation}


def run_nodes(ctx: Context, lambda_reg, lr, steps, init, seed=0, ablation="resample", batch_size=32, **_):
    t0 = time.perf_counter()
    g = ctx.graph
    F = g.n_forward

    def to_masks(z):
        return None, torch.cat([torch.ones(1, dtype=z.dtype), z])  # input never masked

    log_alpha, loss_v = _train(ctx, F - 1, to_masks, lambda_reg, lr, steps, init, seed, batch_size, "sp")
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
    params = _params(lambda_reg, lr, steps, batch_size, init, seed, ablation)
    return finish(ctx, "sp", params, scores, in_graph, t0, node_scores=node_scores, extra={"final_loss": loss_v})


def run_edges(ctx: Context, lambda_reg, lr, steps, init, seed=0, ablation="resample", batch_size=32, **_):
    t0 = time.perf_counter()
    g = ctx.graph
    log_alpha, loss_v = _train(ctx, g.n_edges, lambda z: (z, None), lambda_reg, lr, steps, init, seed, batch_size,
                               "edge-sp")
    in_graph = (_deterministic(log_alpha) > 0.5).cpu().numpy()
    params = _params(lambda_reg, lr, steps, batch_size, init, seed, ablation)
    return finish(ctx, "edge-sp", params, log_alpha, in_graph, t0, extra={"final_loss": loss_v})
