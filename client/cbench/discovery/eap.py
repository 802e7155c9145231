"""EAP (Syed et al. 2024): edge attribution patching.

score(u -> v) = -(a_u - a'_u) . d loss / d input_v, summed over examples and positions and
divided by the number of examples (the loss is a mean over examples), where ``a`` are the clean
activations of the base input and ``a'`` the ablated ones. It is the first-order estimate of
the loss increase when the edge alone is ablated, and equals ``-d loss / d mask`` at the
all-ones edge mask (:meth:`CircuitRuntime.edge_mask_gradient`); it is computed from the
gradients at every destination input (one forward and one backward pass per chunk of examples).

A metric that compares with the clean model (no labels: kl, l2, or mae/mse against the clean
outputs) takes its reference from the same pass, which is at the clean point: |y - y_clean| is
then exactly 0 there with gradient 0, not +-1 by rounding (``method.details.metric_reference``).
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, clean_point_gradients, finish, progress_bar
from cbench.runtime.memory import row_parts, rows_per_pass

PARAMS = {
    "batch_size": Param(int, 512, low=1, doc="examples per forward/backward pass (at most; fewer "
                                               "when a pass would exceed CBENCH_MEMORY_MB)"),
    "ablation": COMMON_PARAMS["ablation"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
}


def run(ctx: Context, batch_size: int, ablation: str = "resample", top_n=None, rel_threshold=0.05, **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    N = ctx.data.n_examples
    total = torch.zeros(rt.n_edges, dtype=rt.dtype, device=rt.device)
    P = rt.tokens_tensor(ctx.data.base[:1]).shape[1]
    chunks = row_parts(N, min(batch_size, rows_per_pass(rt, P)))  # bounded memory per pass
    bar = progress_bar(len(chunks), "eap", ctx.progress)
    for s, e in chunks:
        abl = ctx.ablated if ctx.ablated.shape[1] == 1 else ctx.ablated[:, s:e]
        # d loss / d input [K, n, P, D] and the clean node outputs, from one pass at the clean point
        grads, clean_acts = clean_point_gradients(ctx, s, e, abl, same_pass=ctx.reference_is_clean)
        total += rt.scores_from_input_gradients(clean_acts - abl, grads) * ((e - s) / N)
        del grads, clean_acts  # freed before the next pass runs (not held through it)
        bar.update(1)
    bar.close()
    params = {"batch_size": batch_size, "ablation": ablation, "top_n": top_n, "rel_threshold": rel_threshold}
    return finish(ctx, "eap", params, -total, None, t0, extra={"metric_reference": _reference(ctx)})


def _reference(ctx: Context, same_pass: bool = True) -> str:
    """What the metric compares with (``method.details.metric_reference`` of the output)."""
    if not ctx.reference_is_clean:
        return "labels"
    if same_pass:
        return "clean outputs of the same pass (no kink at the evaluation point)"
    return "clean outputs of a separate pass"
