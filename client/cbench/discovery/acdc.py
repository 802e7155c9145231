"""ACDC (Conmy et al. 2023): prune edges in reverse topological order with a threshold.

Destinations are visited in reverse topological order (``logits``, then the last MLP, the last
layer's heads' v, k, q inputs, ... — :attr:`Graph.backward_slots` reversed); for each, its
incoming edges from the latest source to the earliest. Removing edge ``e`` from the current
circuit changes the metric (a loss: KL to the clean model or L2) by ``delta``; when ``delta <
threshold`` the edge is removed for good and the current metric becomes the new value. A
destination node whose outputs were all removed already loses its inputs without evaluation
(``delta = 0``, exactly what evaluating would give).

Scores: every edge is evaluated exactly once, and its ``delta`` at that moment is its score
(the threshold at which this run would have pruned it), so one run ranks every edge; the
classic circuit at ``threshold`` is ``in_graph``.

Speed: a pass for a destination starts at that destination, from the clean outputs of the nodes
before it (nothing upstream has changed yet in reverse topological order). Candidate removals are evaluated speculatively in batches on the runtime. For the next
``w`` candidates of a destination, row ``j`` of one batched pass removes candidates ``1..j``
together; walking the rows in order gives the exact sequential ACDC decisions up to the first
edge that is kept, after which the remaining rows are discarded and a new batch starts. Each
decision is therefore the one sequential ACDC makes; only the number of passes shrinks. Inside a
pass the runtime shares the part of every input that is the same for all rows, and does not
compute heads or MLPs whose outgoing edges are all removed. ``span=True`` lets a batch run on
into the next destinations (fewer but heavier passes; slower on the models measured).
Hyperparameters ``window``, ``prefix_cache`` and ``span`` change speed only, never the result
(tests/test_discovery.py).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.metrics import metric_slice

PARAMS = {
    "threshold": Param(float, 0.01, low=0.0, doc="tau: remove an edge when the metric grows by less than this"),
    "window": Param(int, 64, low=1, high=65536, doc="largest number of speculative removals per batched pass"),
    "ablation": COMMON_PARAMS["ablation"],
    "prefix_cache": Param(bool, True, doc="start each pass at the destination from the clean activations"),
    "span": Param(bool, False, doc="let one speculative batch run on into the next destinations (fewer, heavier passes)"),
}


def _evaluate(ctx: Context, masks: torch.Tensor, start_slot=None, prefix=None, rows_budget: int = 8192) -> torch.Tensor:
    rt = ctx.runtime
    B = ctx.data.n_examples
    per = max(1, rows_budget // max(B, 1))
    vals = []
    with torch.no_grad():
        for s in range(0, masks.shape[0], per):
            outs = rt.run_masks(ctx.data.base, masks[s:s + per], ablated=ctx.ablated, chunk_size=per,
                                start_slot=start_slot, prefix=prefix)
            vals.append(ctx.metric(outs))
    return torch.cat(vals)


def run(ctx: Context, threshold: float, window: int, ablation: str = "resample", prefix_cache: bool = True,
        span: bool = False, **_) -> "DiscoveryResult":
    t0 = time.perf_counter()
    g = ctx.graph
    rt = ctx.runtime
    E = g.n_edges
    mask = torch.ones(E, dtype=rt.dtype, device=rt.device)
    scores = np.zeros(E, dtype=np.float64)
    by_dst: dict[int, list[int]] = {}
    for e in g.edges:
        by_dst.setdefault(e.backward, []).append(e.index)
    out_edges = {f: np.flatnonzero(g.edge_forward == f) for f in range(g.n_forward)}
    m_cur = float(_evaluate(ctx, mask[None])[0])
    # Destinations are visited in reverse order, so every change so far is to inputs of this
    # destination or later ones: the nodes before it still compute their clean outputs, and a
    # pass can start at the destination (run_masks' start_slot) from the clean activations.
    clean_acts = ctx.clean_acts if prefix_cache else None
    n_passes = 1
    w = min(window, 8)
    bar = progress_bar(E, "acdc", ctx.progress)
    dsts = [(k, sorted(by_dst.get(k, []), key=lambda i: -g.edges[i].forward)) for k in reversed(range(g.n_backward))]
    dst_node = [g.backward_slots[k][0] for k, _ in dsts]

    def dead(m: torch.Tensor, j: int) -> bool:
        node = dst_node[j]
        return node != "logits" and float(m[out_edges[g.forward_index(node)]].sum()) == 0.0

    di, ci = 0, 0  # next destination (visiting order) and next candidate within it
    while di < len(dsts):
        # The speculative chain: the next candidates in visiting order, across destinations when
        # `span` allows, each row removing every candidate before it in the chain. A destination
        # entered on the way is checked for being dead under that same assumption.
        spec = mask.clone()
        rows, entries = [], []
        j, c = di, ci
        while j < len(dsts) and len(rows) < w:
            k, cands = dsts[j]
            if c == 0 and dead(spec, j):
                entries.append(("dead", j))
                spec[cands] = 0.0
                j += 1
                continue
            if c >= len(cands) or (rows and not span and j != entries[-1][1]):
                if c < len(cands):
                    break
                j, c = j + 1, 0
                continue
            e = cands[c]
            spec[e] = 0.0
            rows.append(spec.clone())
            entries.append(("eval", j, c, e))
            c += 1
        if not entries:  # nothing left but destinations without candidates
            di, ci = j, c
            continue
        vals = []
        if rows:
            start = min(dsts[en[1]][0] for en in entries if en[0] == "eval")
            vals = _evaluate(ctx, torch.stack(rows), start if prefix_cache else None, clean_acts).tolist()
            n_passes += 1
        prev = m_cur
        r = 0
        kept = False
        for en in entries:
            if en[0] == "dead":
                _, jj = en
                cands = dsts[jj][1]
                mask[cands] = 0.0
                scores[cands] = 0.0
                bar.update(len(cands))
                di, ci = jj + 1, 0
                continue
            _, jj, cc, e = en
            delta = vals[r] - prev
            scores[e] = delta
            bar.update(1)
            if delta < threshold:
                mask[e] = 0.0
                prev = vals[r]
                r += 1
                di, ci = (jj, cc + 1) if cc + 1 < len(dsts[jj][1]) else (jj + 1, 0)
            else:
                kept = True
                di, ci = (jj, cc + 1) if cc + 1 < len(dsts[jj][1]) else (jj + 1, 0)
                break
        m_cur = prev
        done = r + (1 if kept else 0)
        w = min(window, w * 2) if not kept else max(4, min(window, 2 * max(done, 1)))
    bar.close()
    in_graph = (mask > 0.5).cpu().numpy()
    params = {"threshold": threshold, "window": window, "ablation": ablation, "prefix_cache": prefix_cache,
              "span": span}
    return finish(ctx, "acdc", params, scores, in_graph, t0,
                  extra={"n_passes": n_passes, "final_metric": m_cur, "n_edges_kept": int(in_graph.sum())})
