"""Exact edge activation patching (EActP): the loss increase when each edge alone is ablated.

score(e) = loss(all edges but e) - loss(full model), exactly, for every edge. Masks with one
zero each are put on a batch dimension, so one forward pass evaluates many edges
(``rows_per_pass`` rows = masks x examples).
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar

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
    per = max(1, rows_per_pass // max(N, 1))
    scores = torch.zeros(E, dtype=rt.dtype)
    with torch.no_grad():
        full = float(ctx.metric(rt.run(ctx.data.base, edge_mask=torch.ones(E, device=rt.device), ablated=ctx.ablated).output))
        bar = progress_bar(E, "activation-patching", ctx.progress)
        for s in range(0, E, per):
            e = min(E, s + per)
            masks = torch.ones(e - s, E, dtype=rt.dtype, device=rt.device)
            masks[torch.arange(e - s, device=rt.device), torch.arange(s, e, device=rt.device)] = 0.0
            outs = rt.run_masks(ctx.data.base, masks, ablated=ctx.ablated, chunk_size=per)
            scores[s:e] = ctx.metric(outs).cpu() - full
            bar.update(e - s)
        bar.close()
    params = {"rows_per_pass": rows_per_pass, "ablation": ablation, "top_n": top_n, "rel_threshold": rel_threshold}
    return finish(ctx, "activation-patching", params, scores, None, t0)
