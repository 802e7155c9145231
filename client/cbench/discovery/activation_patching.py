"""Exact edge activation patching (EActP): the loss increase when each edge alone is ablated.

score(e) = loss(all edges but e) - loss(full model), exactly, for every edge. Masks with one
zero each are put on a batch dimension, so one forward pass evaluates many edges
(``rows_per_pass`` rows = masks x examples, and at most what fits ``CBENCH_MEMORY_MB``,
:func:`cbench.runtime.memory.masked_rows_per_pass`; where one mask's examples do not fit, its
examples are split and the metric, a mean over examples, summed over the parts). A pass
starts at the ablated edge's destination, from the clean node outputs before it.
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.tasks.metrics import metric_slice
from cbench.runtime.memory import masked_rows_per_pass, row_parts

PARAMS = {
    "rows_per_pass": Param(int, 8192, low=1, doc="rows (edges x examples) per forward pass"),
    "ablation": COMMON_PARAMS["ablation"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
}


def run(ctx: Context, rows_per_pass: int, ablation: str = "resample", top_n=None, rel_threshold=0.05, **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    E = rt.n_edges
    N = ctx.data.n_examples
    P = rt.tokens_tensor(ctx.data.base[:1]).shape[1]
    rows = min(rows_per_pass, masked_rows_per_pass(rt, P))  # bounded memory per pass
    per = max(1, rows // max(N, 1))  # masks per pass
    parts = row_parts(N, rows)  # examples per pass
    scores = torch.zeros(E, dtype=rt.dtype)

    # Each mask zeroes one edge, so every node before that edge's destination computes its clean
    # output: passes start at the destination (the clean node outputs as their prefix), with the
    # edges taken in destination order so a batch's masks share most of that prefix.
    dest = rt.graph.edge_backward
    order = torch.as_tensor(dest).argsort(stable=True)

    def metric(masks, start_slot: int):  # [M] metric values of these edge masks (a mean over all examples)
        total = torch.zeros(masks.shape[0], dtype=rt.dtype)
        for s, e in parts:
            abl = ctx.ablated if ctx.ablated.shape[1] == 1 else ctx.ablated[:, s:e]
            outs = rt.run_masks(ctx.data.base[s:e], masks, ablated=abl, chunk_size=per, start_slot=start_slot,
                                prefix=ctx.clean_acts[:, s:e])
            m = ctx.metric if (s, e) == (0, N) else metric_slice(ctx.metric, s, e)
            total += torch.as_tensor(m(outs), dtype=rt.dtype).reshape(-1).cpu() * ((e - s) / N)
        return total

    with torch.no_grad():
        full = float(metric(torch.ones(1, E, dtype=rt.dtype, device=rt.device), rt.n_backward - 1)[0])
        bar = progress_bar(E, "activation-patching", ctx.progress)
        for s in range(0, E, per):
            idx = order[s:s + per]
            masks = torch.ones(len(idx), E, dtype=rt.dtype, device=rt.device)
            masks[torch.arange(len(idx), device=rt.device), idx.to(rt.device)] = 0.0
            scores[idx] = metric(masks, int(dest[int(idx[0])])) - full
            bar.update(len(idx))
        bar.close()
    params = {"rows_per_pass": rows_per_pass, "ablation": ablation, "top_n": top_n, "rel_threshold": rel_threshold}
    return finish(ctx, "activation-patching", params, scores, None, t0)
