"""Faithfulness at MIB's circuit sizes, and its integrals CPR and CMD (MIB section 3.1).

* Circuit sizes: k ∈ {.001, .002, .005, .01, .02, .05, .1, .2, .5, 1}, a fraction of the
  graph's (q/k/v-level) edges. C_k holds the top ⌊k·n⌋ edges — **at least one edge** when
  k·n < 1, so that the smallest sizes of a small model are not all the empty circuit (MIB only
  requires |C_k|/|N| ≤ k; its models have tens of thousands of edges, ours may have 30).
  CPR circuits rank edges by their **signed** score, CMD circuits by **|score|**; ties keep the
  graph's edge order (stable sort).
* f(C) = (m(C) − m(∅)) / (m(N) − m(∅)), where m is minus a loss on the base inputs, averaged
  over examples (BOS excluded). By default the loss compares with the **full model's outputs**:
  KL(M(x) ‖ C(x)) for categorical tasks, the squared difference (``l2``) for numerical ones. Then
  m(N) = 0 and f = 1 − loss(C)/loss(∅): the share of the empty circuit's divergence from the
  model that C recovers — defined whenever ablating everything changes the output, and never
  dividing by a gap that is only noise, as a loss against labels can when the model is already
  at the labels' loss floor. Any metric of :mod:`cbench.tasks.metrics` (``ce``, ``mae``, ``mse``
  against the labels, or the clean model's outputs when the data has none) can be chosen instead.
* Edges outside C are ablated with ``resample`` (the paired source input's activations: MIB's
  counterfactual ablation, the default), ``mean`` (per-position mean over the base inputs) or
  ``zero``. m(N) is the unablated model; m(∅) ablates every edge.
* CPR = ∫ f dk and CMD = ∫ |1 − f| dk by the trapezoid rule on the grid points (from k = .001
  to k = 1; no extra point at k = 0).

Every circuit of both curves and the two ends run as one batch of masks through the runtime (a
circuit the two curves share, as they do when no score is negative, runs once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.scoring.statistics import trapezoid

__all__ = ["SIZE_GRID", "edges_at_size", "circuits_at_sizes", "FaithfulnessCurve", "faithfulness_curve",
           "FaithfulnessResult", "evaluate_faithfulness", "task_metric", "edge_score_vector",
           "faithfulness_of_circuits", "faithfulness_of_circuit_pairs", "circuits_of", "circuit_losses"]

SIZE_GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def edges_at_size(n_edges: int, k: float) -> int:
    """⌊k·n⌋ edges, at least 1 (see the module docstring)."""
    return max(1, min(n_edges, int(math.floor(k * n_edges + 1e-9))))


def circuits_at_sizes(scores, grid: Sequence[float] = SIZE_GRID, absolute: bool = False,
                      construction: str = "top-n", graph=None) -> np.ndarray:
    """Boolean masks ``[len(grid), n_edges]``: the top edges by signed (or absolute) score;
    ``construction="greedy"`` (needs ``graph``): MIB's greedy search from the logits instead
    (:mod:`cbench.graph.circuits`)."""
    if construction != "top-n":
        from cbench.graph.circuits import circuit_masks

        n = np.asarray(scores).size
        return circuit_masks(graph, scores, [edges_at_size(n, k) for k in grid], absolute, construction)
    s = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise UsageError("edge scores must be finite numbers")
    key = np.abs(s) if absolute else s
    order = np.argsort(-key, kind="stable")
    out = np.zeros((len(grid), s.size), dtype=bool)
    for i, k in enumerate(grid):
        out[i, order[:edges_at_size(s.size, k)]] = True
    return out


def edge_score_vector(graph, doc: Mapping) -> np.ndarray:
    """Scores of an edge-scores document in ``graph.edges`` order."""
    edges = doc["edges"]
    return np.array([float(edges[name]["score"]) for name in graph.edge_names], dtype=np.float64)


def task_metric(case, data, metric: str | None = None, protocol: str = "cbench"):
    """The loss m is built from: a :class:`cbench.tasks.metrics.Metric` bound to the data's labels
    (or the clean model's outputs; ``logit_diff``: the data's (correct, wrong) answers). Default:
    kl/l2; under ``protocol="mib"`` MIB's metric for the task where the data has answer pairs
    (:func:`cbench.scoring.mib_protocol.mib_metric`: logit difference on IOI)."""
    from cbench.tasks import metrics as M

    if metric is None and protocol == "mib":
        from cbench.scoring.mib_protocol import mib_metric

        metric = mib_metric(data)
    name = metric or ("kl" if case.task_type == "categorical" else "l2")
    M.check_metric(name, case.task_type)
    clean = case.runtime.clean(data.base)
    if name == "logit_diff":
        answers = getattr(data, "answers", None)
        if answers is None:
            raise UsageError("metric logit_diff needs each pair's (correct, wrong) answer, which only the IOI "
                             "task's data carries; choose kl, ce or leave out --metric")
        return M.make_metric(name, case.task_type, clean_outputs=clean, labels=answers,
                             valid=getattr(data, "valid", None)), clean
    labels = None if name in ("kl", "l2") else data.labels
    return M.make_metric(name, case.task_type, clean_outputs=clean, labels=labels,
                         valid=getattr(data, "valid", None)), clean


@dataclass(frozen=True)
class FaithfulnessCurve:
    grid: tuple[float, ...]
    n_edges: tuple[int, ...]  # edges in each C_k
    f: tuple[float, ...]
    m_full: float
    m_empty: float
    m_circuits: tuple[float, ...]
    absolute: bool

    @property
    def area(self) -> float:
        """∫ f dk (CPR when the circuits are signed-score circuits)."""
        return trapezoid(self.f, self.grid)

    @property
    def distance(self) -> float:
        """∫ |1 − f| dk (CMD when the circuits are absolute-score circuits)."""
        return trapezoid([abs(1 - v) for v in self.f], self.grid)

    def to_dict(self) -> dict:
        clean = lambda x: None if isinstance(x, float) and not math.isfinite(x) else x  # noqa: E731
        return {"grid": list(self.grid), "n_edges": list(self.n_edges), "f": [clean(v) for v in self.f],
                "m_full": clean(self.m_full), "m_empty": clean(self.m_empty),
                "ranking": "absolute" if self.absolute else "signed"}


def faithfulness_curve(case, data, scores, absolute: bool = False, ablation: str = "resample",
                       metric: str | None = None, grid: Sequence[float] = SIZE_GRID,
                       positional: bool = True, _bound=None, construction: str = "top-n",
                       protocol: str = "cbench") -> FaithfulnessCurve:
    """f(C_k) for every k of ``grid`` (see the module docstring); ``protocol="mib"``: MIB's
    circuits (``int(k·n)`` edges, pruned; :mod:`cbench.scoring.mib_protocol`)."""
    masks = _circuits(case, scores, grid, absolute, construction, protocol)
    return faithfulness_of_circuits(case, data, masks, grid, ablation, metric, positional, absolute, _bound)


def _circuits(case, scores, grid: Sequence[float], absolute: bool, construction: str, protocol: str) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    case.graph.check_mask(scores)
    if protocol == "mib":
        from cbench.scoring.mib_protocol import circuits_at_sizes as mib_circuits

        return mib_circuits(case.graph, scores, grid, absolute=absolute, construction=construction)
    return circuits_at_sizes(scores, grid, absolute=absolute, construction=construction, graph=case.graph)


def faithfulness_of_circuits(case, data, masks: np.ndarray, grid: Sequence[float], ablation: str = "resample",
                             metric: str | None = None, positional: bool = True, absolute: bool = False,
                             _bound=None, protocol: str = "cbench") -> FaithfulnessCurve:
    """f of given circuits (boolean masks ``[len(grid), n_edges]``, e.g. a circuits-at-sizes
    submission), one per size of ``grid``."""
    return _curves_of(case, data, [masks], grid, ablation, metric, positional, [absolute], _bound, protocol)[0]


def _curves_of(case, data, mask_sets: Sequence[np.ndarray], grid: Sequence[float], ablation: str, metric: str | None,
               positional: bool, absolutes: Sequence[bool], _bound, protocol: str) -> list[FaithfulnessCurve]:
    """One :class:`FaithfulnessCurve` per set of circuits, every circuit of every set and the two
    ends in one batch of masks (a circuit that several sets share, and the ends, run once)."""
    graph = case.graph
    sets = []
    for masks in mask_sets:
        masks = np.atleast_2d(np.asarray(masks, dtype=bool))
        if masks.shape != (len(grid), graph.n_edges):
            raise UsageError(f"need one circuit per size: masks of shape ({len(grid)}, {graph.n_edges}), "
                             f"got {masks.shape}")
        sets.append(masks)
    all_masks = np.concatenate([np.zeros((1, graph.n_edges), bool), *sets, np.ones((1, graph.n_edges), bool)])
    metric_fn, _ = _bound if _bound is not None else task_metric(case, data, metric, protocol)
    losses = circuit_losses(case.runtime, data, all_masks, metric_fn, ablation, positional)
    n = len(grid)
    return [_curve(grid, masks, np.concatenate([losses[:1], losses[1 + i * n:1 + (i + 1) * n], losses[-1:]]), absolute)
            for i, (masks, absolute) in enumerate(zip(sets, absolutes))]


_BATCH_FLOATS = 250_000  # per node output: 1 MB in float32


def circuit_losses(rt, data, masks: np.ndarray, metric_fn, ablation: str = "resample",
                   positional: bool = True) -> np.ndarray:
    """The loss (``metric_fn``, one value per circuit) of every circuit of ``masks`` (boolean
    ``[M, n_edges]``) with the edges outside it ablated. Each distinct circuit runs once, in
    batches of masks that each start with the empty circuit (the masked pass computes every row
    of a batch from the batch's first row, :func:`cbench.runtime.masked_forward.masked_pass`) and
    compute every node (as a batch holding the full circuit does; heads computed in a subset
    round differently), so a circuit's loss is the same to the bit whichever other circuits share
    its batch -- one method's circuits or every method's of a case. A batch holds about
    ``_BATCH_FLOATS`` floats per node output (fewer rows ran faster per row on the demo's models)."""
    masks = np.atleast_2d(np.asarray(masks, dtype=bool))
    distinct: dict[bytes, int] = {}
    index = np.array([distinct.setdefault(m.tobytes(), len(distinct)) for m in masks])
    rows = np.stack([np.frombuffer(k, dtype=bool) for k in distinct])
    tokens = rt.tokens_tensor(data.base)
    B, P = tokens.shape
    per = 4096 // max(B, 1)  # masks per pass, the empty circuit included: at most 4,096 rows
    empty = [i for i in range(len(rows)) if not rows[i].any()]
    rest = [i for i in range(len(rows)) if rows[i].any()]
    if per < 2 or not rest:  # one circuit per pass
        batches = [[i] for i in range(len(rows))]
    else:
        zero = empty[0] if empty else None
        per = max(2, min(per, _BATCH_FLOATS // max(B * P * rt.d_model, 1)))
        batches = [[zero] + rest[s:s + per - 1] for s in range(0, len(rest), per - 1)]
    out = np.empty(len(rows), dtype=np.float64)
    with torch.no_grad():
        ablated = rt.ablated_outputs(tokens, data.source, ablation, data.base, positional)
        for part in batches:
            batch = np.stack([np.zeros(rows.shape[1], bool) if i is None else rows[i] for i in part])
            outs = rt.run_masks(tokens, torch.as_tensor(batch, dtype=torch.float32), ablated=ablated, chunk_size=len(part),
                                every_node=len(part) > 1)
            losses = metric_fn(outs).double().cpu().numpy()
            for i, v in zip(part, losses):
                if i is not None:
                    out[i] = v
    return out[index]


def _curve(grid: Sequence[float], masks: np.ndarray, losses: np.ndarray, absolute: bool) -> FaithfulnessCurve:
    """The curve of ``masks`` from the losses of [empty, *masks, full]."""
    m = -losses
    m_empty, m_full = float(m[0]), float(m[-1])
    gap = m_full - m_empty
    if abs(gap) <= 1e-12 * max(1.0, abs(m_full)):
        f = [math.nan] * len(grid)
    else:
        f = [float((v - m_empty) / gap) for v in m[1:-1]]
    return FaithfulnessCurve(tuple(float(k) for k in grid), tuple(int(x) for x in masks.sum(1)), tuple(f),
                             m_full, m_empty, tuple(float(v) for v in m[1:-1]), absolute)


@dataclass(frozen=True)
class FaithfulnessResult:
    cpr: float
    cmd: float
    cpr_curve: FaithfulnessCurve
    cmd_curve: FaithfulnessCurve
    ablation: str
    metric: str
    n_examples: int

    def to_dict(self) -> dict:
        clean = lambda x: None if not math.isfinite(x) else x  # noqa: E731
        return {"cpr": clean(self.cpr), "cmd": clean(self.cmd), "ablation": self.ablation, "metric": self.metric,
                "n_examples": self.n_examples, "cpr_curve": self.cpr_curve.to_dict(),
                "cmd_curve": self.cmd_curve.to_dict(),
                "integration": "trapezoid over k in " + ", ".join(f"{k:g}" for k in self.cpr_curve.grid)}


def evaluate_faithfulness(case, data, scores, ablation: str = "resample", metric: str | None = None,
                          grid: Sequence[float] = SIZE_GRID, positional: bool = True,
                          construction: str = "top-n", protocol: str = "cbench") -> FaithfulnessResult:
    """CPR (signed-score circuits) and CMD (absolute-score circuits) of one edge-score vector;
    circuits by ``construction`` (``top-n`` or ``greedy``, :mod:`cbench.graph.circuits`) and
    ``protocol`` (``cbench``, or ``mib``: pruned, ``int(k·n)`` edges)."""
    circuits = tuple(_circuits(case, scores, grid, absolute, construction, protocol) for absolute in (False, True))
    return faithfulness_of_circuit_pairs(case, data, [circuits], ablation, metric, grid, positional, protocol)[0]


def faithfulness_of_circuit_pairs(case, data, pairs: Sequence[tuple[np.ndarray, np.ndarray]], ablation: str = "resample",
                                  metric: str | None = None, grid: Sequence[float] = SIZE_GRID,
                                  positional: bool = True, protocol: str = "cbench") -> list[FaithfulnessResult]:
    """CPR and CMD of several score vectors at once (e.g. every method's on one model), from their
    (signed-score, absolute-score) circuits at the sizes of ``grid`` (:func:`circuits_of`): every
    circuit of every pair runs once, each with the same loss as on its own (:func:`circuit_losses`)."""
    bound = task_metric(case, data, metric, protocol)
    curves = _curves_of(case, data, [m for pair in pairs for m in pair], grid, ablation, metric, positional,
                        [False, True] * len(pairs), bound, protocol)
    return [FaithfulnessResult(cpr.area, cmd.distance, cpr, cmd, ablation, bound[0].name, data.n_examples)
            for cpr, cmd in zip(curves[0::2], curves[1::2])]


def circuits_of(case, scores, grid: Sequence[float] = SIZE_GRID, absolute: bool = False, construction: str = "top-n",
                protocol: str = "cbench") -> np.ndarray:
    """The circuits at the sizes of ``grid`` that CPR (``absolute=False``) or CMD ranks ``scores``
    into (raises :class:`~cbench.errors.UsageError` for scores that are not finite numbers)."""
    return _circuits(case, scores, grid, absolute, construction, protocol)
