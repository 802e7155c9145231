"""``--protocol mib``: circuits, AUROC and CPR/CMD built the way MIB's circuit-track code builds
them (``hannamw/MIB-circuit-track`` with the EAP-IG library it pins, ``hannamw/EAP-IG`` branch
``MIB``), so a number can sit beside MIB's leaderboard. ``cbench`` (the default protocol) is
the paper-faithful one; see docs/mib-parity.md for every difference.

What the reference code does, and what this module reproduces:

* **Greedy circuits** (``Graph.apply_greedy(n, absolute, prune=True)``): from the logits, add
  the best-scoring edge into the current node set n times, its source joining the set; then
  **prune**: repeatedly drop nodes without an in-graph incoming (``input`` exempt) or outgoing
  edge and edges whose ends are gone (``Graph.prune``). On a DAG this keeps exactly the edges on
  an ``input`` -> ``logits`` path of the circuit (:meth:`cbench.graph.graph.Graph.prune_dangling`).
  The loop runs ``while n > 0: n -= 1`` on a float ``n``, so a size of ``pct * n_edges`` edges
  takes ⌈pct · n_edges⌉ edges in floating point (:func:`greedy_count`).
* **Top-n circuits** (``Graph.apply_topn(n, absolute, prune=True)``): the n best edges, pruned.
* **Scores are float32** (the reference keeps them in a float32 tensor), so ranking uses the
  float32 value.
* **Ties in greedy circuits** (:func:`mib_greedy_order`): ``apply_greedy`` keeps its candidates
  as a chain of ``heapq.merge`` calls, one sorted list per node that joined the circuit (the
  logits' in-edges first, then each new node's in-edges as it joins), and ``heapq.merge`` yields
  the earlier iterable's item on equal keys. So on equal scores the edge whose destination joined
  the circuit first wins (deterministic). The logits' list is a stable sort of the graph's edges
  in construction order (deterministic); every other node's list is a stable sort of its
  ``parent_edges`` **set**, so ties among one node's in-edges follow Python's string hashing of
  the edge names (``PYTHONHASHSEED``). cbench reproduces the deterministic part and breaks the
  hash-dependent part by the order ``Graph.from_model`` adds the edges (:func:`insertion_orders`:
  the reference's order if its sets kept insertion order); :mod:`cbench.scoring.mib_hash_order`
  gives the order, and the AUROC, that a given hash seed produces. (Ties in top-n circuits are
  not covered: the reference's ``torch.argsort`` is not a stable sort; cbench keeps the graph's
  edge order there.)
* **AUROC** (``evaluation.py::evaluate_area_under_roc`` with ``print_results.py::area_under_curve``):
  at each size pct ∈ {.001, ..., 1} the greedy absolute circuit of ``pct · n_edges`` edges,
  pruned, is compared with the reference circuit edge by edge (TPR = TP / (TP + FN), FPR =
  FP / (FP + TN)); the AUROC is the trapezoid over those ten (FPR, TPR) points with FPR divided by
  its last value, no point at (0, 0). Every ground-truth edge is a positive (the reference has no
  notion of edges that cannot carry signal).
* **CPR / CMD circuits** (``evaluation.py::evaluate_area_under_curve``): ``int(pct · n_edges)``
  edges (0 at the smallest sizes of a small graph: the empty circuit), top-n (or greedy for
  methods MIB runs greedily, IFR), signed for CPR and absolute for CMD, pruned.
* **The metric** (``metrics.py::logit_diff`` with ``loss=False``, ``dataset.py``'s IOI labels):
  on IOI the logit of the indirect object minus the subject's at the last position, averaged
  over examples (:func:`mib_metric`; the data carries the pairs, ``TaskData.answers``). Tasks
  without answer pairs (the SIIT, Tracr and stress models: MIB's code has no metric for them)
  keep cbench's default (KL to the full model, L2 for numerical outputs).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cbench.errors import UsageError
from cbench.graph.graph import promote_edge_name

PROTOCOLS = ("cbench", "mib")
SIZE_GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)

__all__ = [
    "PROTOCOLS",
    "SIZE_GRID",
    "MibRoc",
    "check_protocol",
    "circuits_at_sizes",
    "greedy_circuit",
    "greedy_count",
    "insertion_orders",
    "mib_auroc",
    "mib_greedy_order",
    "mib_key",
    "mib_metric",
    "METRIC_NOTES",
    "random_mib_auroc",
    "side_by_side",
    "side_by_side_markdown",
    "topn_circuit",
    "topn_count",
    "truth_labels",
]


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}; choose one of: {', '.join(PROTOCOLS)}")
    return protocol


METRIC_NOTES = {
    "logit_diff": "MIB's metric for tasks with answer pairs: logit of the correct answer minus the wrong one's "
                  "at the answer position (IOI: the indirect object minus the subject)",
    "kl": "MIB's code has no metric for this task; cbench's default, KL from the full model",
    "l2": "MIB's code has no metric for this task; cbench's default, squared distance to the full model",
}


def mib_metric(data) -> str | None:
    """The metric MIB's code scores the task's CPR/CMD with: ``logit_diff`` when the data carries
    (correct, wrong) answer pairs (IOI), else None (cbench's default)."""
    return "logit_diff" if getattr(data, "answers", None) is not None else None


def greedy_count(pct: float, n_edges: int) -> int:
    """Edges ``apply_greedy(pct * n_edges)`` adds: its ``while n > 0: n -= 1`` loop on a float."""
    n = pct * n_edges
    count = 0
    while n > 0 and count < n_edges:
        n -= 1
        count += 1
    return count


def topn_count(pct: float, n_edges: int) -> int:
    """Edges ``evaluate_area_under_curve`` asks ``apply_topn`` for: ``int(pct * n_edges)``."""
    return min(n_edges, int(pct * n_edges))


def mib_key(scores) -> np.ndarray:
    """The scores as the reference holds them (float32), as float64 for sorting."""
    s = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise UsageError("edge scores must be finite numbers")
    return s.astype(np.float32).astype(np.float64)


_QKV_RANK = {None: 0, "q": 0, "k": 1, "v": 2}


def insertion_orders(graph) -> dict[str, list[int]]:
    """Per destination node, its in-edge indices in the order the reference's ``Graph.from_model``
    adds them (to ``Graph.edges`` and to the node's ``parent_edges``): by source in residual-stream
    order, and for a head's inputs q, k, v of one source before the next source."""
    fwd = {n: i for i, n in enumerate(graph.forward_nodes)}
    into: dict[str, list] = {}
    for e in graph.edges:
        into.setdefault(e.dst, []).append(e)
    return {node: [e.index for e in sorted(es, key=lambda e: (fwd[e.src], _QKV_RANK[e.qkv]))]
            for node, es in into.items()}


def mib_greedy_order(graph, scores, absolute: bool = True,
                     within: Mapping[str, Sequence[int]] | None = None) -> np.ndarray:
    """Edge indices in the order ``apply_greedy`` adds them (every edge: each node reaches the logits).

    Best float32 score first (|score| when ``absolute``); on equal scores, the edge whose destination
    joined the circuit first (the logits first), as ``heapq.merge`` on the chain of per-node
    candidate lists gives; among equal-scored in-edges of one node, the order ``within[node]`` lists
    them (edge indices; the reference's is its ``parent_edges`` set's iteration order, which
    follows string hashing: :mod:`cbench.scoring.mib_hash_order`). Nodes ``within`` leaves out, and
    always the logits (the reference sorts ``Graph.edges``, an insertion-ordered dict, there), take
    :func:`insertion_orders`: the order is then independent of ``PYTHONHASHSEED``."""
    key = mib_key(scores)
    if key.shape != (graph.n_edges,):
        raise UsageError(f"need one score per edge ({graph.n_edges}), got {key.shape}")
    if absolute:
        key = np.abs(key)
    into = insertion_orders(graph)
    rank = np.zeros(graph.n_edges, dtype=np.int64)
    for node, idx in into.items():
        rank[idx] = np.arange(len(idx))
    for node, idx in (within or {}).items():
        if node != "logits":
            if sorted(idx) != sorted(into.get(node, ())):
                raise UsageError(f"a tie order for {node!r} must list its in-edges, each once")
            rank[np.asarray(idx, dtype=np.int64)] = np.arange(len(idx))
    heap: list[tuple[float, int, int, int]] = []
    joined = {"logits"}

    def push(node: str, list_id: int) -> None:
        # the node's candidate list: sorted by score, stable over its (set) order
        for pos, i in enumerate(sorted(into.get(node, ()), key=lambda i: (-key[i], rank[i]))):
            heapq.heappush(heap, (-key[i], list_id, pos, i))

    push("logits", 0)
    order = []
    while heap:
        i = heapq.heappop(heap)[3]
        order.append(i)
        src = graph.edges[i].src
        if src not in joined:
            joined.add(src)
            push(src, len(joined) - 1)
    return np.asarray(order, dtype=np.int64)


def greedy_circuit(graph, scores, n: int, absolute: bool = True, prune: bool = True,
                   order: np.ndarray | None = None) -> np.ndarray:
    """Boolean edge mask of ``apply_greedy(n, absolute, prune)``."""
    if order is None:
        order = mib_greedy_order(graph, scores, absolute)
    mask = np.zeros(graph.n_edges, dtype=bool)
    mask[order[:max(0, int(n))]] = True
    return graph.prune_dangling(mask) if prune else mask


def topn_circuit(graph, scores, n: int, absolute: bool = True, prune: bool = True,
                 order: np.ndarray | None = None) -> np.ndarray:
    """Boolean edge mask of ``apply_topn(n, absolute, level='edge', prune)``."""
    if order is None:
        key = mib_key(scores)
        order = np.argsort(-(np.abs(key) if absolute else key), kind="stable")
    mask = np.zeros(graph.n_edges, dtype=bool)
    mask[order[:max(0, int(n))]] = True
    return graph.prune_dangling(mask) if prune else mask


def circuits_at_sizes(graph, scores, grid: Sequence[float] = SIZE_GRID, absolute: bool = False,
                      construction: str = "top-n") -> np.ndarray:
    """Masks ``[len(grid), n_edges]`` of MIB's CPR/CMD circuits (``int(pct · n)`` edges, pruned)."""
    key = mib_key(scores)
    if key.shape != (graph.n_edges,):
        raise UsageError(f"need one score per edge ({graph.n_edges}), got {key.shape}")
    if construction == "greedy":
        order, build = mib_greedy_order(graph, key, absolute), greedy_circuit
    elif construction == "top-n":
        order, build = np.argsort(-(np.abs(key) if absolute else key), kind="stable"), topn_circuit
    else:
        raise UsageError(f"unknown circuit construction {construction!r}; choose one of: top-n, greedy")
    return np.stack([build(graph, key, topn_count(k, graph.n_edges), absolute, True, order) for k in grid])


def truth_labels(graph, truth_edges: Iterable[str]) -> np.ndarray:
    """Per graph edge: in the reference circuit (a q/k/v edge named in it, or, for a head-level
    truth, a q/k/v edge whose head-level edge is named)."""
    truth = set(truth_edges)
    if not truth:
        raise UsageError("the ground-truth circuit is empty; there is nothing to score against")
    return np.fromiter((e.name in truth or promote_edge_name(e.name) in truth for e in graph.edges),
                       dtype=bool, count=graph.n_edges)


@dataclass(frozen=True)
class MibRoc:
    """MIB's greedy-pruned ROC: one point per circuit size."""

    grid: tuple[float, ...]
    n_requested: tuple[int, ...]  # edges greedy construction added
    n_edges: tuple[int, ...]  # edges left after pruning
    tpr: tuple[float, ...]
    fpr: tuple[float, ...]
    precision: tuple[float, ...]
    auroc: float
    absolute: bool

    def to_dict(self) -> dict:
        clean = lambda x: None if isinstance(x, float) and not math.isfinite(x) else x
        return {"protocol": "mib", "construction": "greedy, pruned", "ranking": "absolute" if self.absolute else "signed",
                "auroc": clean(self.auroc), "grid": list(self.grid), "n_requested": list(self.n_requested),
                "n_edges": list(self.n_edges), "tpr": [clean(v) for v in self.tpr],
                "fpr": [clean(v) for v in self.fpr], "precision": [clean(v) for v in self.precision]}


def mib_auroc(graph, scores, truth_edges: Iterable[str], absolute: bool = True,
              grid: Sequence[float] = SIZE_GRID, within: Mapping[str, Sequence[int]] | None = None,
              labels: np.ndarray | None = None) -> MibRoc:
    """MIB's InterpBench edge AUROC of one edge-score vector (see the module docstring); ``within``:
    the tie order among a node's in-edges (:func:`mib_greedy_order`; default :func:`insertion_orders`);
    ``labels``: :func:`truth_labels` of ``truth_edges`` when the caller has them (many score vectors)."""
    labels = truth_labels(graph, truth_edges) if labels is None else labels
    key = mib_key(scores)
    if key.shape != (graph.n_edges,):
        raise UsageError(f"need one score per edge ({graph.n_edges}), got {key.shape}")
    order = mib_greedy_order(graph, key, absolute, within)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    req, kept, tpr, fpr, prec = [], [], [], [], []
    for pct in grid:
        n = greedy_count(pct, graph.n_edges)
        mask = greedy_circuit(graph, key, n, absolute, True, order)
        tp = int((mask & labels).sum())
        fp = int((mask & ~labels).sum())
        req.append(n)
        kept.append(int(mask.sum()))
        tpr.append(tp / n_pos if n_pos else math.nan)
        fpr.append(fp / n_neg if n_neg else math.nan)
        prec.append(tp / (tp + fp) if tp + fp else 0.0)
    auc = math.nan
    if fpr[-1] and math.isfinite(fpr[-1]):
        x = [v / fpr[-1] for v in fpr]
        auc = float(sum((x[i + 1] - x[i]) * (tpr[i + 1] + tpr[i]) / 2 for i in range(len(x) - 1)))
    return MibRoc(tuple(float(k) for k in grid), tuple(req), tuple(kept), tuple(tpr), tuple(fpr), tuple(prec),
                  auc, absolute)


def random_mib_auroc(graph, truth_edges: Iterable[str], seed: int, n_seeds: int = 100) -> float:
    """The random baseline's mean MIB AUROC over ``n_seeds`` draws (seeds ``seed``, ``seed + 1``, ...;
    each the scores ``cbench discover --method random --seed s`` gives)."""
    from cbench.discovery.random_scores import draw

    labels = truth_labels(graph, truth_edges)
    vals = [mib_auroc(graph, draw(graph.n_edges, seed + k), truth_edges, labels=labels).auroc for k in range(n_seeds)]
    vals = [v for v in vals if math.isfinite(v)]
    return float(np.mean(vals)) if vals else math.nan


def side_by_side(rank: dict, mib: dict, tiers: dict, methods: Sequence[str]) -> dict:
    """``{tier: {method: {"rank": mean, "mib": mean, "n": cases}}}`` over the cases of each tier
    (``tiers``: case -> tier) where both numbers exist."""
    out: dict = {}
    for tier in sorted({tiers.get(c, "?") for c in rank}):
        cases = [c for c in rank if tiers.get(c, "?") == tier]
        row = {}
        for m in methods:
            pairs = [(rank[c][m], mib.get(c, {}).get(m)) for c in cases if rank[c].get(m) is not None]
            pairs = [(a, b) for a, b in pairs if b is not None and math.isfinite(b)]
            if pairs:
                row[m] = {"rank": float(np.mean([a for a, _ in pairs])), "mib": float(np.mean([b for _, b in pairs])),
                          "n": len(pairs)}
        out[tier] = row
    return out


def side_by_side_markdown(table: dict, methods: Sequence[str]) -> str:
    """The bench's table of both AUROC kinds per method and tier."""
    intro = ("Edge AUROC two ways, mean per tier: cbench's rank AUROC (every edge ranked by its score) / MIB's "
             "greedy-pruned AUROC (MIB's `evaluate_area_under_roc`: greedy |score| circuits at ten sizes, pruned; "
             "docs/mib-parity.md):")
    lines = [intro, "", "| tier | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for tier, row in table.items():
        cells = [f"{row[m]['rank']:.3f} / {row[m]['mib']:.3f}" if m in row else "–" for m in methods]
        n = max((r["n"] for r in row.values()), default=0)
        lines.append(f"| {tier} ({n} cases) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
