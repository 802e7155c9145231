"""ACDC (Conmy et al. 2023): prune edges in reverse topological order with a threshold.

Destinations are visited in reverse topological order (``logits``, then the last MLP, the last
layer's heads' v, k, q inputs, ... — :attr:`Graph.backward_slots` reversed); for each, its
incoming edges from the latest source to the earliest. Removing edge ``e`` from the current
circuit changes the metric (a loss: KL to the clean model or L2) by ``delta``; when ``delta <
threshold`` the edge is removed for good and the current metric becomes the new value. A
destination node whose outputs were all removed already loses its inputs without evaluation
(``delta = 0``, exactly what evaluating would give). Likewise an edge whose source has the same
clean and ablated output (e.g. a Tracr head that ignores its inputs, under resample ablation)
changes nothing when removed: its ``delta`` is exactly 0 and it is decided without a pass.

Scores: every edge is evaluated exactly once, and its ``delta`` at that moment is its score
(the threshold at which this run would have pruned it), so one run ranks every edge; the
classic circuit at ``threshold`` is ``in_graph``.

Speed (the result is the sequential one; tests/test_discovery.py checks it against the
hook-based reference and across these settings):

* Incremental passes (``prefix_cache=True``). In reverse topological order every change so far
  is to inputs of the current destination ``X`` or of nodes after it, so the nodes before ``X``
  still have their clean outputs and removing edge ``u -> X`` changes ``X``'s input by exactly
  ``-(clean[u] - ablated[u])``. The sweep keeps the current output of every node and the current
  input of every destination; evaluating a candidate recomputes ``X`` and only the nodes its
  change reaches through edges still in the circuit (few, once most edges are pruned), adding
  each changed node's output difference to its readers' inputs, then the outputs and the metric.
  A removal that is kept becomes the new current state. ``prefix_cache=False`` runs every
  evaluation as a whole masked pass instead (slow; a cross-check).
* Speculative batches. For the next ``w`` candidates of a destination, row ``j`` of one batched
  pass removes candidates ``1..j`` together; walking the rows in order gives the exact
  sequential decisions up to the first edge that is kept, after which the remaining rows are
  discarded and a new batch starts. Each destination starts with few rows (one when a row is
  costly next to a pass's fixed cost, up to 8 for tiny models; the nearest source, tried first,
  is the likeliest to be kept), ``w`` doubles while edges keep being removed and drops back after a
  kept edge, so little work is spent past a kept edge. ``window`` caps ``w``. Each row's input
  is built by subtracting the removed edges' differences one at a time, the reference's order.
* Memory (``CBENCH_MEMORY_MB``, :mod:`cbench.runtime.memory`): the sweep keeps the current node
  outputs and destination inputs of all examples; a batch's rows are capped so that the new inputs
  and outputs of every slot and node its change reaches fit the budget, and where one row of all
  examples does not fit (large models, many pairs) the examples are evaluated in parts (the
  metric, a mean over examples, summed with their shares) and the kept row is recomputed when
  it is committed. Where everything fits (the benchmark's models) the arithmetic is unchanged.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.tasks.metrics import metric_slice
from cbench.runtime import memory
from cbench.runtime.attention_ops import head_pattern
from cbench.runtime.weights import add_qk_position

PARAMS = {
    "threshold": Param(float, 0.01, low=0.0, doc="tau: remove an edge when the metric grows by less than this"),
    "window": Param(int, 64, low=1, high=65536, doc="largest number of speculative removals per batched pass"),
    "ablation": COMMON_PARAMS["ablation"],
    "prefix_cache": Param(bool, True, doc="incremental passes from the cached node outputs (False: whole "
                                          "masked passes, a slow cross-check)"),
}

ROWS_BUDGET = 8192  # (candidate x example) rows per batched pass
CHEAP_ROW_WORK = 1e6  # multiply-adds per candidate row (~) that cost about as much as one pass's overhead


class _Incremental:
    """The current masked run, kept as node outputs and destination inputs, updated in place."""

    def __init__(self, ctx: Context):
        rt = self.rt = ctx.runtime
        g = self.g = ctx.graph
        self.metric = ctx.metric
        self.acts = ctx.clean_acts.clone()  # [F, B, P, D] current node outputs
        # nodes before the current destination are clean when it is visited, so removing edge
        # u -> X always changes X's input by -(clean[u] - ablated[u]) (taken per candidate)
        self.clean, self.ablated = ctx.clean_acts, ctx.ablated
        self.inp = rt.destination_inputs(self.acts)  # [K, B, P, D] current destination inputs
        N, P, D = self.acts.shape[1:]
        self.n_examples = N
        itemsize = self.acts.element_size()
        self.budget = memory.budget_bytes()
        # bytes of one (candidate row x example) tensor: a [P, D] input or output, [P, V] logits
        self.unit_bytes = P * D * itemsize
        self.out_bytes = 3 * P * memory.output_width(rt) * itemsize  # outputs, log-softmax, its product
        self.ex = slice(None)  # the examples the current evaluation works on
        self.out = rt.node_output("logits", self.inp[-1])
        self.m_cur = float(self.metric(self.out))
        self.slots = {}  # forward node index (F for logits) -> its backward slots
        for k, (node, _qkv) in enumerate(g.backward_slots):
            f = g.n_forward if node == "logits" else g.forward_index(node)
            self.slots.setdefault(f, []).append(k)
        self.names = list(g.forward_nodes) + ["logits"]
        # per-run constants, so a pass is only the tensor arithmetic: each head's weight slices,
        # the metric's clean-side terms, the unembedding
        self.heads = {}
        model = rt.model
        for f in self.slots:
            if f < g.n_forward and len(self.slots[f]) == 3:
                n = g.node(self.names[f])
                blk = model.blocks[n.layer]
                attn, h = blk.attn, n.head
                ln = None if isinstance(blk.ln1, torch.nn.Identity) else blk.ln1
                self.heads[f] = (ln, (attn.W_Q[h], attn.W_K[h], attn.W_V[h]), (attn.b_Q[h], attn.b_K[h], attn.b_V[h]),
                                 attn.W_O[h], attn.attn_scale, float(attn.IGNORE), n.layer)
        # MLPs of TransformerLens's plain kind: the products of CircuitRuntime.node_output
        self.mlps = {}
        if not rt.cfg.is_layer_norm_activation():
            for f in self.slots:
                if f < g.n_forward and len(self.slots[f]) == 1:
                    blk = model.blocks[g.node(self.names[f]).layer]
                    if type(blk.mlp).__name__ == "MLP":
                        ln = None if isinstance(blk.ln2, torch.nn.Identity) else blk.ln2
                        m = blk.mlp
                        self.mlps[f] = (ln, m.b_in, m.W_in, m.act_fn, m.b_out, m.W_out)
        self.proj = {}  # slot -> projection of its current input (q, k or v)
        self.pattern = {}  # head -> attention pattern from its current q and k inputs
        self.fast_metric = self.metric.bound() if hasattr(self.metric, "bound") else self.metric
        self.part_metrics = {}  # (start, stop) -> the bound metric of those examples
        self.unembed = rt.unembed_fn()

    def begin(self, k: int, kept_matrix: np.ndarray) -> None:
        """Plan the passes for destination slot ``k`` under the current circuit: which later nodes
        its change reaches, and through which kept edges."""
        g = self.g
        node = g.backward_slots[k][0]
        self.k = k
        self.fx = g.n_forward if node == "logits" else g.forward_index(node)
        changed = [self.fx]
        self.plan = []
        for f in range(self.fx + 1, g.n_forward + 1):
            reads = [(s, [c for c in changed if kept_matrix[c, s]]) for s in self.slots[f]]
            if any(srcs for _, srcs in reads):
                self.plan.append((f, reads))
                changed.append(f)
        # memory of one (candidate row x example) of an evaluation: the new input of every slot
        # the change reaches, and the new output and its difference of every node on the way,
        # counted twice for the temporaries beside them (layer norms, the MLP's hidden layer,
        # partial sums; measured on the GPT-2 shape: ~1.5-2x the kept tensors)
        kept = 3 + sum(len(reads) for _f, reads in self.plan) + 2 * len(self.plan)
        row_bytes = 2 * kept * self.unit_bytes + self.out_bytes
        per_pass = max(1, int(self.budget // row_bytes))  # (row x example)s within the budget
        N = self.n_examples
        self.max_rows = max(1, per_pass // N)  # candidate rows of all examples in one pass
        # when one row of all examples does not fit: the examples in parts (one row at a time)
        self.parts = memory.row_parts(N, per_pass) if per_pass < N else [(0, N)]

    def _project(self, s: int, i: int, x: torch.Tensor | None) -> torch.Tensor:
        """q, k or v (``i``) of slot ``s``'s new input ``x``, or of its current one (cached)."""
        ln, W, b = self._head[0], self._head[1][i], self._head[2][i]

        def project(xs):
            y = ln(xs) if ln is not None else xs
            if i < 2:  # queries and keys read a shortformer's position embedding after ln1
                y = add_qk_position(self.rt, y)
            return y @ W + b

        if x is None:
            y = self.proj.get(s)
            if y is None:
                y = self.proj[s] = project(self.inp[s])
            return y[self.ex]
        return project(x)

    def _compute(self, f: int, x: dict, w: int) -> torch.Tensor:
        """Node f's output ``[w, B, P, ...]`` from new slot inputs ``x`` (others: current)."""
        slots = self.slots[f]
        if f == self.g.n_forward:
            return self.unembed(x[slots[0]])
        head = self.heads.get(f)
        if head is None:
            mlp = self.mlps.get(f)
            if mlp is None:
                return self.rt.node_output(self.names[f], x[slots[0]])
            ln, b_in, W_in, act, b_out, W_out = mlp
            xin = x[slots[0]]
            if ln is not None:
                xin = ln(xin)
            shape = xin.shape
            out = torch.addmm(b_out, act(torch.addmm(b_in, xin.reshape(-1, shape[-1]), W_in)), W_out)
            return out.view(*shape[:-1], out.shape[-1])
        # a head: inputs not changed are shared by every row, and their projections (and the
        # pattern, when neither q nor k changed) are those of the current state
        self._head = head
        sq, sk, sv = slots
        xq, xk, xv = x.get(sq), x.get(sk), x.get(sv)
        if xq is None and xk is None:
            pattern = self.pattern.get(f)
            if pattern is None:
                ex, self.ex = self.ex, slice(None)  # cached for every example
                pattern = self.pattern[f] = self._pattern(self._project(sq, 0, None), self._project(sk, 1, None))
                self.ex = ex
            pattern = pattern[self.ex]
        else:
            pattern = self._pattern(self._project(sq, 0, xq), self._project(sk, 1, xk))
        y = (pattern @ self._project(sv, 2, xv)) @ head[3]
        return y.expand(w, *y.shape[-3:]) if y.dim() == 3 else y

    def _pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        # the arithmetic of CircuitRuntime.node_output (rotary, soft-cap, causal and local masks)
        return head_pattern(self.rt, self._head[6], q, k)

    def evaluate(self, cands: list[int], edge_src: np.ndarray) -> list[float]:
        """The metric with candidates ``0..j`` removed, for every row ``j``."""
        self.pending = None  # the last evaluation's rows are not kept through this one
        if len(self.parts) == 1:
            self.ex = slice(None)
            new_inp, new_acts, out = self._rows(cands, edge_src)
            self.pending = (new_inp, new_acts, out)
            return self.fast_metric(out).tolist()
        # one row of every example does not fit the budget: the examples in parts, the metric
        # (a mean over examples) summed with each part's share; commit recomputes its row
        total = np.zeros(len(cands))
        for start, stop in self.parts:
            self.ex = slice(start, stop)
            out = self._rows(cands, edge_src)[2]
            total += np.asarray(self._part_metric(start, stop)(out).tolist()) * ((stop - start) / self.n_examples)
            del out
        self.ex = slice(None)
        self.pending = (cands, edge_src)
        return total.tolist()

    def _part_metric(self, start: int, stop: int):
        key = (start, stop)
        if key not in self.part_metrics:
            m = metric_slice(self.metric, start, stop)
            self.part_metrics[key] = m.bound() if hasattr(m, "bound") else m
        return self.part_metrics[key]

    def _rows(self, cands: list[int], edge_src: np.ndarray):
        """``(new slot inputs, new node outputs, outputs)`` of the examples ``self.ex``, one row per
        candidate prefix."""
        w = len(cands)
        ex = self.ex
        # row j: candidates 0..j removed, subtracted one at a time (the reference's order)
        prev = self.inp[self.k][ex]
        x_new = torch.empty((w,) + tuple(prev.shape), dtype=prev.dtype, device=prev.device)
        for j, e in enumerate(cands):
            u = edge_src[e]
            diff = self.clean[u][ex] - self.ablated[u].expand_as(self.clean[u])[ex]
            prev = torch.sub(prev, diff, out=x_new[j])
        new_inp = {self.k: x_new}
        y = self._compute(self.fx, new_inp, w)
        new_acts = {self.fx: y}
        # a node whose output did not change in any row (exactly: Tracr's saturated attention and
        # ReLUs often absorb a change) is not passed on; nodes reading only unchanged ones are skipped
        deltas = {}
        if self.fx < self.g.n_forward:
            d = y - self.acts[self.fx][ex]
            if bool(d.any()):
                deltas[self.fx] = d
        for f, reads in self.plan:
            x = {}
            for s, srcs in reads:
                live = [c for c in srcs if c in deltas]
                if live:
                    xs = self.inp[s][ex]
                    for c in live:
                        xs = xs + deltas[c]
                    x[s] = xs
            if not x:
                continue
            new_inp.update(x)
            yf = self._compute(f, x, w)
            new_acts[f] = yf
            if f < self.g.n_forward:
                d = yf - self.acts[f][ex]
                if bool(d.any()):
                    deltas[f] = d
        out = new_acts.get(self.g.n_forward)
        if out is None:  # the change reaches no output
            o = self.out[ex]
            out = o.expand(w, *o.shape)
        return new_inp, new_acts, out

    def commit(self, row: int) -> None:
        """Make row ``row`` of the last evaluation the current state."""
        if len(self.pending) == 2:  # evaluated in parts: recompute that row, part by part
            cands, edge_src = self.pending
            touched: set[int] = set()
            for start, stop in self.parts:
                self.ex = slice(start, stop)
                new_inp, new_acts, out = self._rows(cands[:row + 1], edge_src)
                self._write(new_inp, new_acts, out, -1)
                touched.update(new_inp)
            self.ex = slice(None)
            self.pending = None
            self._forget(touched)
            return
        new_inp, new_acts, out = self.pending
        self.pending = None
        self._write(new_inp, new_acts, out, row)
        self._forget(new_inp)

    def _write(self, new_inp: dict, new_acts: dict, out: torch.Tensor, row: int) -> None:
        ex = self.ex
        for s, v in new_inp.items():
            self.inp[s][ex] = v[row]
        for f, v in new_acts.items():
            if f < self.g.n_forward:
                self.acts[f][ex] = v[row]
        if ex == slice(None):
            self.out = out[row]
        else:
            self.out[ex] = out[row]

    def _forget(self, slots) -> None:
        """Drop the cached projections and patterns computed from these slots' old inputs."""
        for s in slots:
            self.proj.pop(s, None)
            node, qkv = self.g.backward_slots[s]
            if qkv in ("q", "k"):
                self.pattern.pop(self.g.forward_index(node), None)


class _WholePasses:
    """Every evaluation is a whole masked pass of the runtime (the cross-check)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        rt = ctx.runtime
        self.kept = torch.ones(rt.n_edges, dtype=rt.dtype, device=rt.device)
        self.m_cur = self._values(self.kept[None])[0]

    def _values(self, masks: torch.Tensor) -> list[float]:
        ctx = self.ctx
        outs = ctx.runtime.run_masks(ctx.data.base, masks, ablated=ctx.ablated)
        return ctx.metric(outs).tolist()

    def begin(self, k: int, kept_matrix: np.ndarray) -> None:
        pass

    def evaluate(self, cands: list[int], edge_src: np.ndarray) -> list[float]:
        rows = self.kept.repeat(len(cands), 1)
        for j, e in enumerate(cands):
            rows[j:, e] = 0.0
        self.rows = rows
        return self._values(rows)

    def commit(self, row: int) -> None:
        self.kept = self.rows[row].clone()


def run(ctx: Context, threshold: float, window: int, ablation: str = "resample", prefix_cache: bool = True,
        **_) -> "DiscoveryResult":
    t0 = time.perf_counter()
    g = ctx.graph
    E, F, K = g.n_edges, g.n_forward, g.n_backward
    edge_src, edge_dst = g.edge_forward, g.edge_backward
    kept = np.ones(E, dtype=bool)
    kept_matrix = np.zeros((F, K), dtype=bool)
    kept_matrix[edge_src, edge_dst] = True
    scores = np.zeros(E, dtype=np.float64)
    into = {k: sorted(np.flatnonzero(edge_dst == k).tolist(), key=lambda i: -edge_src[i]) for k in range(K)}
    out_of = {f: np.flatnonzero(edge_src == f) for f in range(F)}
    # sources whose clean and ablated outputs are identical (see the module docstring)
    inert = [bool(torch.equal(ctx.clean_acts[f], ctx.ablated[f].expand_as(ctx.clean_acts[f]))) for f in range(F)]
    max_rows = max(1, ROWS_BUDGET // max(ctx.data.n_examples, 1))
    # rows cheap next to a pass's fixed (Python) cost: start wider; costly rows: start with one
    cfg = ctx.runtime.cfg
    row_work = ctx.data.n_examples * ctx.clean_acts.shape[2] * cfg.d_model * max(cfg.d_mlp or 0, 4 * cfg.d_head)
    w_start = int(min(window, max(1, min(8, round(CHEAP_ROW_WORK / max(row_work, 1))))))
    bar = progress_bar(E, "acdc", ctx.progress)
    with torch.inference_mode():
        # a post-normalized model's head shares depend on every head of the layer (one node's
        # output is not a function of its own inputs): whole masked passes
        incremental = prefix_cache and not getattr(ctx.runtime, "post_norm", False)
        sweep = _Incremental(ctx) if incremental else _WholePasses(ctx)
        m_cur = sweep.m_cur
        n_passes = 1
        for k in reversed(range(K)):
            node = g.backward_slots[k][0]
            cands = into[k]
            if not cands:
                continue
            if node != "logits" and not kept[out_of[g.forward_index(node)]].any():
                kept[cands] = False  # a dead node: its inputs go without evaluation (delta 0)
                kept_matrix[edge_src[cands], k] = False
                bar.update(len(cands))
                continue
            # an edge whose source's clean and ablated outputs are identical changes nothing:
            # its delta is exactly 0 and the state stays as it is, so it is decided unevaluated
            trivial = [e for e in cands if inert[edge_src[e]]]
            if trivial:
                scores[trivial] = 0.0
                if threshold > 0.0:
                    kept[trivial] = False
                    kept_matrix[edge_src[trivial], k] = False
                bar.update(len(trivial))
                cands = [e for e in cands if not inert[edge_src[e]]]
                if not cands:
                    continue
            sweep.begin(k, kept_matrix)
            c = 0
            w = w_start  # the nearest source is the likeliest to be kept: few rows first, then double
            rows = min(max_rows, getattr(sweep, "max_rows", max_rows))  # within the memory budget
            while c < len(cands):
                batch = cands[c:c + min(w, rows)]
                vals = sweep.evaluate(batch, edge_src)
                n_passes += 1
                removed, stopped = 0, False
                for j, e in enumerate(batch):
                    delta = vals[j] - m_cur
                    scores[e] = delta
                    if delta < threshold:
                        kept[e] = False
                        kept_matrix[edge_src[e], k] = False
                        m_cur = vals[j]
                        removed = j + 1
                    else:
                        stopped = True
                        break
                if removed:
                    sweep.commit(removed - 1)
                done = removed + stopped
                bar.update(done)
                c += done
                w = min(window, max(2, w_start)) if stopped else min(window, 2 * w)
    bar.close()
    params = {"threshold": threshold, "window": window, "ablation": ablation, "prefix_cache": prefix_cache}
    return finish(ctx, "acdc", params, scores, kept, t0,
                  extra={"n_passes": n_passes, "final_metric": m_cur, "n_edges_kept": int(kept.sum())})
