"""EAP-IG (Hanna et al. 2024; MIB appendix E.2): edge attribution patching with integrated
gradients, in two variants.

score(u -> v) = -(a_u - a'_u) . (1/Z) sum_k d loss / d input_v at interpolation points alpha_k,
summed over positions and averaged over examples (the loss is a mean over examples). The points
follow the public EAP-IG reference code: ``inputs`` uses alpha = k / Z for k = 0 .. Z-1 (from the
corrupted input, excluding the clean point, where a loss such as MAE against the clean outputs has
no useful gradient); ``activations`` uses alpha = k / Z for k = 1 .. Z.

* ``inputs`` (``eap-ig-inputs``): the interpolation is on the input embeddings only
  (``input`` = a' + alpha (a - a')); every other node computes its output naturally. The
  gradients of one set of Z runs score every edge. O(Z) passes.
* ``activations`` (``eap-ig-activations``): for each group of nodes that write at the same depth
  (the input; the heads of layer l; the MLP of layer l) the outputs of that group are
  interpolated, everything downstream runs naturally, and the gradients score the edges leaving
  that group. O(Z x depth) passes.

Interpolation is a node mask of value alpha on the group (see :mod:`cbench.runtime`), so all
Z steps (and, for ``activations``, several groups) run as one batch, with one backward pass
that gives the gradient at every destination input for every row. For ``inputs`` with resample
ablation the alpha = 0 rows are exactly the run on the source inputs, so they also supply the
ablated outputs (no separate pass), and position 0 (the same BOS token in every row, causal
attention) is computed once: its clean and ablated outputs agree, so its gradients are not needed.
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.tasks.metrics import metric_slice
from cbench.runtime.memory import rows_per_pass

PARAMS = {
    "steps": Param(int, 5, low=1, high=1000, doc="Z, the number of interpolation steps"),
    "batch_rows": Param(int, 4096, low=1, doc="rows (examples x steps x groups) per forward/backward pass "
                                                  "(at most; fewer when a pass would exceed CBENCH_MEMORY_MB)"),
    "ablation": COMMON_PARAMS["ablation"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
}


def node_groups(graph) -> list[list[int]]:
    """Forward-node index groups by depth: [input], heads of layer 0, MLP 0, heads of layer 1, ..."""
    groups = [[0]]
    f = 1
    for _layer in range(graph.n_layers):
        groups.append(list(range(f, f + graph.n_heads)))
        f += graph.n_heads
        if graph.has_mlp:
            groups.append([f])
            f += 1
    return groups


def collect_gradients(ctx: Context, steps: int, batch_rows: int, variant: str = "inputs", first: int | None = None):
    """The integrated gradients of every destination input, one block per pass of at most
    ``batch_rows`` rows (and at most what fits ``CBENCH_MEMORY_MB``, :mod:`cbench.runtime.memory`),
    yielded as ``(groups, start, stop, grads, diff)`` as soon as the pass is done, so a caller
    folds each block into its sums and memory holds one block at a time: ``grads``
    ``[K, G, stop - start, P, D]`` is d loss / d input summed over the Z steps (the loss a mean
    over the block's examples) for the ``G`` node groups interpolated in that pass, and ``diff``
    ``[F, stop - start, P, D]`` is clean minus ablated node outputs of those examples. Shared by
    EAP-IG and NAP-IG. ``first``: the first step k of alpha = k / Z (default 0 for the inputs
    variant, 1 for activations; MIB's node-level NAP-IG-inputs takes k = 1 .. Z)."""
    rt = ctx.runtime
    g = ctx.graph
    N = ctx.data.n_examples
    Z = steps
    F, K = g.n_forward, g.n_backward
    groups = [[0]] if variant == "inputs" else node_groups(g)
    if first is None:
        first = 0 if variant == "inputs" else 1
    alphas = torch.arange(first, first + Z, dtype=rt.dtype, device=rt.device) / Z
    clean_acts = ctx.clean_acts  # [F, N, P, D]
    P, D = clean_acts.shape[2], clean_acts.shape[3]
    # inputs variant, resample ablation not computed yet: the alpha = 0 rows are exactly the run
    # on the source inputs, so they supply the ablated outputs (only the input row is needed first)
    from_block = variant == "inputs" and first == 0 and ctx._ablated is None and rt._ln_kind() is not None
    # position 0 (BOS): under resample ablation clean and ablated outputs agree there when base and
    # source share its token (causal attention), so its gradients are not needed (computed once)
    base_t, src_t = rt.tokens_tensor(ctx.data.base), None
    if ctx.data.source is not None:
        src_t = rt.tokens_tensor(ctx.data.source)
    shared_first = (variant == "inputs" and ctx.ablation == "resample" and rt.causal and src_t is not None and src_t.shape == base_t.shape
                    and bool((base_t[:, 0] == base_t[0, 0]).all()) and bool((src_t[:, 0] == base_t[0, 0]).all()))
    if from_block:
        ablated = rt._embed(src_t)[None]  # [1, N, P, D]: the input node
        block_acts = torch.empty(F, N, P, D, dtype=rt.dtype, device=rt.device)
    else:
        ablated = ctx.ablated.expand(-1, N, P, -1)
    batch_rows = min(batch_rows, rows_per_pass(rt, P))  # bounded memory per pass
    # activations: the last step is alpha = 1 (the clean point), so a clean-model metric takes its
    # reference from it (no kink at an evaluation point); inputs: alpha < 1, a separate clean pass
    same_pass = ctx.reference_is_clean and variant == "activations"
    # how many groups and examples per pass (rows = groups x steps x examples)
    g_per = max(1, min(len(groups), batch_rows // (Z * N)))
    n_per = N if g_per * Z * N <= batch_rows else max(1, batch_rows // Z)
    jobs = [(gs, s) for gs in range(0, len(groups), g_per) for s in range(0, N, n_per)]
    bar = progress_bar(len(jobs), f"eap-ig-{variant}", ctx.progress)
    for gs, s in jobs:
        grp = groups[gs:gs + g_per]
        e = min(N, s + n_per)
        n = e - s
        G = len(grp)
        m = metric_slice(ctx.metric, s, e)
        node_mask = torch.ones(G, Z, F, dtype=rt.dtype, device=rt.device)
        for gi, members in enumerate(grp):
            node_mask[gi][:, members] = alphas[:, None]
        node_mask = node_mask.reshape(G * Z, F)  # one row per (group, step); applies to n examples each
        tokens = ctx.data.base[s:e].repeat(G * Z, 1)
        abl = ablated[:, s:e]  # the same for every (group, step) row block

        def metric_fn(out, m=m, G=G, n=n):
            out = out.reshape(G, Z, n, *out.shape[1:])
            if same_pass:  # the alpha = 1 rows are the clean point of this pass: the reference
                return m.same_pass(out, out[:, Z - 1:]).sum() / Z
            return m(out).sum() / Z

        if from_block:
            grads, _, acts0 = rt.input_gradients(tokens, metric_fn, node_mask=node_mask, ablated=abl,
                                                 sum_steps=(G, Z), first_block_acts=True,
                                                 shared_first=shared_first)
            block_acts[:, s:e] = acts0
            diff = clean_acts[:, s:e] - acts0
        else:
            grads, _ = rt.input_gradients(tokens, metric_fn, node_mask=node_mask, ablated=abl, sum_steps=(G, Z),
                                          shared_first=shared_first)
            diff = clean_acts[:, s:e] - abl
        if shared_first:
            diff[:, :, 0] = 0.0  # equal there (up to the rounding of two ways of computing it)
        bar.update(1)
        yield grp, s, e, grads.reshape(K, G, n, *grads.shape[2:]), diff  # grads summed over steps
    bar.close()
    if from_block:
        ctx.ablated = block_acts


def run(ctx: Context, steps: int, batch_rows: int, variant: str = "inputs", ablation: str = "resample",
        top_n=None, rel_threshold=0.05, **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    g = ctx.graph
    N = ctx.data.n_examples
    F, K = g.n_forward, g.n_backward
    mat = torch.zeros(F, K, dtype=rt.dtype, device=rt.device)
    for grp, s, e, grads, diff in collect_gradients(ctx, steps, batch_rows, variant):
        for gi, members in enumerate(grp):
            if variant == "inputs":
                members = slice(0, F)  # the input-interpolated gradients score every edge
            d = diff[members]
            mat[members] += (d.reshape(d.shape[0], -1) @ grads[:, gi].reshape(K, -1).T) * ((e - s) / N)
        del grads, diff, d  # freed before the next pass runs (not held through it)
    scores = -g.from_matrix(mat)
    name = f"eap-ig-{variant}"
    params = {"steps": steps, "batch_rows": batch_rows, "ablation": ablation, "top_n": top_n,
              "rel_threshold": rel_threshold}
    from cbench.discovery.eap import _reference

    same_pass = ctx.reference_is_clean and variant == "activations"  # as collect_gradients decides
    return finish(ctx, name, params, scores, None, t0, extra={"metric_reference": _reference(ctx, same_pass)})


def run_inputs(ctx: Context, **params):
    return run(ctx, variant="inputs", **params)


def run_activations(ctx: Context, **params):
    return run(ctx, variant="activations", **params)
