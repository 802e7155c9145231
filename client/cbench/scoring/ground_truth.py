"""Scoring an edge-scores document against a case's ground-truth circuit (InterpBench appendix D).

The rules, in one place:

* **Edge AUROC at q/k/v granularity** (the default, ``edge_auroc``): over every edge of the graph
  (``input->a1.h0<q>`` and ``input->a1.h0<k>`` are two edges), ranked by |score|, against the
  ground truth's q/k/v edges. The released circuits have q/k/v detail, so nothing needs
  promoting, and a random score vector is at chance (0.5 in expectation).
* **Promoted edge AUROC** (``edge_auroc_promoted``, InterpBench-compatible): q/k/v promoted to
  whole heads in *both* circuits, as InterpBench does. A head-level edge ``src->a1.h0`` is in the
  ground truth if any of its q/k/v edges is; its **score is the largest |score| over its q/k/v
  edges**. The maximum lifts head edges of any noisy method above single edges (random scores
  0.41 on average over the 16 main cases), so it is reported second, for comparison with
  published tables. A head-level ground truth (``granularity: head``) is scored this way only.
* **Signed or absolute.** Ranking by magnitude treats a strongly negative edge as important, as
  ACDC's and EAP's thresholds do. Methods whose scores are mask **logits** (``sp``, ``edge-sp``:
  negative = pruned) are ranked by the **signed** score (max over q/k/v when promoted); a
  document can also say so with ``method.score_kind: "signed"`` (or ``"absolute"``), and
  ``signed=`` overrides both.
* **Edges that cannot carry signal** (``no_signal``: a circuit's ``edge_signal`` marks, or the
  ones :mod:`cbench.scoring.edge_signal` derives from the model's behaviour) are left out of the
  edge ROC entirely -- neither positive nor negative -- unless ``include_no_signal``. Promoted,
  a head edge is left out when every ground-truth q/k/v edge of it is.
* **Numerical resolution** (:mod:`cbench.scoring.resolution`): a score whose magnitude is below
  ``64 * eps(dtype) * max |score|`` cannot be told from 0 by the arithmetic that computed it, so
  it is ranked as 0 (tied with the exact zeros, half credit in the AUROC); the ground-truth edges
  that only such scores lifted are counted (``n_truth_sub_resolution``). Signed (mask-logit)
  rankings get no floor. ``floor=False`` ranks the raw scores (the figures before issue 45).
* **ROC/AUROC** with ties as one threshold.
* **Nodes** (unchanged by the above) are the heads and MLPs (``input`` and ``logits`` are in
  every circuit, so they are left out of node ROC). A node is in the ground truth if a
  ground-truth edge touches it. A node's score is the largest head-level edge score over the
  edges into or out of it; for a node-level method (the document gives a numeric ``score`` for
  every head and MLP in ``nodes``) the given node scores are used as they are.
* **Precision/recall** at the method's own circuit (``in_graph``), at the edge AUROC's
  granularity (and promoted: a head-level edge is in it if any of its q/k/v edges is); nodes
  from ``nodes[*].in_graph`` (or, when the document gives no node flags, the nodes its in_graph
  edges touch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from cbench.errors import GraphError, SchemaError, UsageError
from cbench.graph.graph import Graph, parse_edge_name, promote_edge_name
from cbench.scoring.resolution import ScoreFloor, floor_scores
from cbench.scoring.statistics import PrecisionRecall, RocCurve, precision_recall, roc_curve

__all__ = ["GroundTruthScore", "truth_head_edges", "head_level_scores", "node_scores_from_edges",
           "node_scores_given", "in_graph_head_edges", "in_graph_nodes", "scored_nodes",
           "check_edge_scores", "score_against_truth", "edge_labels", "EdgeLabels", "circuit_edge_names", "signed_ranking"]


def scored_nodes(graph: Graph) -> list[str]:
    """The nodes node-level ROC ranks: every head and MLP (not input, not logits)."""
    return [n.name for n in graph.nodes if n.kind in ("head", "mlp")]


def circuit_edge_names(graph: Graph, circuit: Mapping) -> list[str]:
    """The edge list of a circuit document, checked against the graph (q/k/v or head names)."""
    edges = circuit.get("edges") if isinstance(circuit, Mapping) else None
    if not isinstance(edges, (list, tuple)):
        raise SchemaError("the circuit has no 'edges' list")
    head = circuit.get("granularity") == "head"
    known = set(graph.head_edge_names) if head else None
    for name in edges:
        if head:
            if name not in known:
                raise GraphError(f"circuit edge {name!r} is not a head-level edge of the model's graph "
                                 f"({graph.describe()})")
        else:
            graph.edge_index(name)
    return list(edges)


def truth_head_edges(graph: Graph, circuit_edges: Iterable[str]) -> set[str]:
    """Ground-truth edges promoted to heads (names may already be head-level)."""
    heads = set(graph.head_edge_names)
    out = set()
    for name in circuit_edges:
        promoted = promote_edge_name(name)
        if promoted not in heads:
            raise GraphError(f"ground-truth edge {name!r} is not in the model's graph ({graph.describe()})")
        out.add(promoted)
    return out


def _edge_vector(graph: Graph, doc: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """(scores, in_graph) over ``graph.edges`` from an edge-scores document."""
    edges = doc["edges"]
    scores = np.empty(graph.n_edges, dtype=np.float64)
    flags = np.zeros(graph.n_edges, dtype=bool)
    for i, name in enumerate(graph.edge_names):
        entry = edges[name]
        scores[i] = float(entry["score"])
        flags[i] = bool(entry.get("in_graph", False))
    return scores, flags


def head_level_scores(graph: Graph, scores: np.ndarray, signed: bool = False) -> np.ndarray:
    """Scores over ``graph.head_edge_names``: max |score| over q/k/v (or max signed score). Leading
    dimensions are kept (``[n, n_edges]`` -> ``[n, n_head_edges]``: many score vectors at once)."""
    scores = np.asarray(scores, dtype=np.float64)
    graph.check_mask(scores)
    index = {n: i for i, n in enumerate(graph.head_edge_names)}
    idx = np.fromiter((index[f"{e.src}->{e.dst}"] for e in graph.edges), dtype=np.int64, count=graph.n_edges)
    vals = scores if signed else np.abs(scores)
    out = np.full((len(index),) + vals.shape[:-1], -np.inf)
    np.maximum.at(out, idx, np.moveaxis(vals, -1, 0))
    return np.moveaxis(out, 0, -1)


def node_scores_from_edges(graph: Graph, head_scores: np.ndarray) -> np.ndarray:
    """Per scored node: the largest head-level edge score over the edges into or out of it."""
    nodes = scored_nodes(graph)
    where = {n: i for i, n in enumerate(nodes)}
    out = np.full(len(nodes), -np.inf)
    for name, v in zip(graph.head_edge_names, head_scores):
        src, dst, _ = parse_edge_name(name)
        for end in (src, dst):
            j = where.get(end)
            if j is not None and v > out[j]:
                out[j] = v
    return out


SIGNED_METHODS = frozenset({"sp", "edge-sp", "node-sp", "edgewise-sp", "subnetwork-probing"})


def signed_ranking(doc: Mapping) -> bool:
    """Whether a document's scores rank by sign (mask logits) rather than by magnitude."""
    method = doc.get("method") if isinstance(doc, Mapping) else None
    if isinstance(method, Mapping):
        kind = method.get("score_kind")
        if kind in ("signed", "logit", "logits"):
            return True
        if kind in ("absolute", "abs", "magnitude"):
            return False
        return str(method.get("name", "")).lower() in SIGNED_METHODS
    return False


def node_scores_given(graph: Graph, doc: Mapping, signed: bool = False, floor: bool = True) -> np.ndarray | None:
    """Node scores from the document's ``nodes`` when it gives a finite number for every scored
    node (a node-level method), else None; sub-resolution magnitudes tied with 0 when ``floor``."""
    nodes = doc.get("nodes")
    if not isinstance(nodes, Mapping):
        return None
    out = []
    for name in scored_nodes(graph):
        entry = nodes.get(name)
        score = entry.get("score") if isinstance(entry, Mapping) else None
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return None
        out.append(float(score) if signed else abs(float(score)))
    values = np.asarray(out)
    return floor_scores(values, doc, signed=signed)[0] if floor else values


def in_graph_head_edges(graph: Graph, flags: np.ndarray) -> np.ndarray:
    """Boolean over ``graph.head_edge_names``: any q/k/v edge of it is in_graph."""
    index = {n: i for i, n in enumerate(graph.head_edge_names)}
    out = np.zeros(len(index), dtype=bool)
    for e, f in zip(graph.edges, flags):
        if f:
            out[index[f"{e.src}->{e.dst}"]] = True
    return out


def in_graph_nodes(graph: Graph, doc: Mapping, head_flags: np.ndarray) -> np.ndarray:
    nodes = doc.get("nodes")
    names = scored_nodes(graph)
    if isinstance(nodes, Mapping) and any(n in nodes for n in names):
        return np.array([bool(nodes.get(n, {}).get("in_graph", False)) for n in names])
    touched = set()
    for name, f in zip(graph.head_edge_names, head_flags):
        if f:
            src, dst, _ = parse_edge_name(name)
            touched.update((src, dst))
    return np.array([n in touched for n in names])


def check_edge_scores(doc, graph: Graph, case: str | None = None, d_model: int | None = None,
                      source: str = "scores file") -> None:
    """Raise one clear error if ``doc`` is not a schema-valid edge-scores document for this case
    and graph (another case, unknown edges, missing or non-finite scores)."""
    import cbench.schemas as validation

    if isinstance(doc, Mapping) and case is not None and isinstance(doc.get("case"), str) \
            and str(doc["case"]) != str(case):
        raise UsageError(f"{source} is for case {doc['case']!r}, not case {case!r}")
    if isinstance(doc, Mapping):
        edges = doc.get("edges")
        if isinstance(edges, Mapping):
            for name, entry in edges.items():
                s = entry.get("score") if isinstance(entry, Mapping) else None
                if isinstance(s, float) and not math.isfinite(s):
                    raise UsageError(f"{source}: edge {name!r} has score {s!r}; every score must be a finite number")
    violations = validation.validate(doc, "edge-scores")
    if not violations:
        violations = validation.check_against_graph(doc, graph, case=case, d_model=d_model, kind="edge-scores")
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""
        raise SchemaError(f"{source}: {first.path}: {first.message}{more}")


@dataclass(frozen=True)
class GroundTruthScore:
    edge_roc: RocCurve  # at ``granularity`` (q/k/v unless the ground truth is head-level)
    node_roc: RocCurve
    edge_pr: PrecisionRecall
    node_pr: PrecisionRecall
    n_head_edges: int
    n_true_edges: int  # ground-truth edges scored at ``granularity`` (no-signal ones left out)
    n_nodes: int
    n_true_nodes: int
    node_scores_source: str  # "edges" (max over incident edges) or "given"
    signed: bool
    granularity: str = "qkv"  # of edge_roc: "qkv" or "head"
    promoted_roc: RocCurve | None = None  # InterpBench-compatible: q/k/v promoted to heads
    promoted_pr: PrecisionRecall | None = None
    n_edges: int = 0  # edges in edge_roc
    n_true_head_edges: int = 0  # ground-truth head-level edges in promoted_roc
    no_signal_edges: tuple = ()  # ground-truth edges left out (or, with include_no_signal, kept)
    no_signal_included: bool = False
    floor: ScoreFloor | None = None  # the resolution the edge scores were ranked at (None: raw scores)
    n_truth_sub_resolution: int = 0  # scored ground-truth edges whose non-zero score is below it

    @property
    def edge_auroc(self) -> float:
        return self.edge_roc.auroc

    @property
    def edge_auroc_promoted(self) -> float:
        return (self.promoted_roc or self.edge_roc).auroc

    @property
    def node_auroc(self) -> float:
        return self.node_roc.auroc

    def to_dict(self, curves: bool = True) -> dict:
        def pr(p: PrecisionRecall) -> dict:
            nan = lambda x: None if isinstance(x, float) and math.isnan(x) else x  # noqa: E731
            return {"tp": p.tp, "fp": p.fp, "fn": p.fn, "tn": p.tn, "precision": nan(p.precision),
                    "recall": nan(p.recall), "f1": nan(p.f1)}

        def roc(r: RocCurve) -> dict:
            return {"fpr": [float(x) for x in r.fpr], "tpr": [float(x) for x in r.tpr]}

        how = "signed score" if self.signed else "|score|"
        out = {
            "edge_auroc": self.edge_auroc,
            "edge_auroc_promoted": self.edge_auroc_promoted,
            "node_auroc": None if math.isnan(self.node_auroc) else self.node_auroc,
            "edge_precision_recall": pr(self.edge_pr), "node_precision_recall": pr(self.node_pr),
            "edge_precision_recall_promoted": pr(self.promoted_pr or self.edge_pr),
            "n_edges": self.n_edges, "n_true_edges": self.n_true_edges,
            "n_head_edges": self.n_head_edges, "n_true_head_edges": self.n_true_head_edges,
            "n_nodes": self.n_nodes, "n_true_nodes": self.n_true_nodes,
            "granularity": self.granularity,
            "edge_score": how if self.granularity == "qkv" else f"max {how} over q/k/v",
            "edge_score_promoted": "max signed over q/k/v" if self.signed else "max |score| over q/k/v",
            "no_signal_edges": list(self.no_signal_edges),
            "no_signal": "included as positives" if self.no_signal_included else "left out of the edge ROC",
            "node_scores": "given by the method" if self.node_scores_source == "given"
            else "max over incident head-level edges",
            "resolution": self.floor.to_dict() if self.floor else None,
            "n_truth_sub_resolution": self.n_truth_sub_resolution,
        }
        if curves:
            out["edge_roc"] = roc(self.edge_roc)
            out["edge_roc_promoted"] = roc(self.promoted_roc or self.edge_roc)
            out["node_roc"] = roc(self.node_roc)
        return out


def _roc(scores: np.ndarray, labels: np.ndarray, what: str) -> RocCurve:
    if not labels.any():
        raise UsageError(f"no ground-truth edge is left to score {what} (every one is marked as carrying no "
                         "signal); pass --include-no-signal to count them")
    if labels.all():
        raise UsageError("the ground-truth circuit contains every edge of the graph; AUROC is undefined")
    return roc_curve(scores, labels)


@dataclass(frozen=True)
class EdgeLabels:
    """What the edge ROCs rank against, derived once from a ground truth: positives and the
    edges kept in the ROC, over ``graph.edges`` (q/k/v; ``None`` for a head-level ground truth)
    and over ``graph.head_edge_names`` (promoted)."""

    truth_heads: frozenset
    marked: tuple  # ground-truth edges marked as carrying no signal
    qkv: bool
    edge_labels: np.ndarray | None
    edge_keep: np.ndarray | None
    head_labels: np.ndarray
    head_keep: np.ndarray


def edge_labels(graph: Graph, truth_edges: Iterable[str], no_signal: Iterable[str] = (),
                include_no_signal: bool = False) -> EdgeLabels:
    """The labels and kept edges of both edge ROCs (the rules in the module docstring)."""
    truth_list = list(dict.fromkeys(truth_edges))
    truth = truth_head_edges(graph, truth_list)
    if not truth:
        raise UsageError("the ground-truth circuit is empty; there is nothing to score against")
    marked = tuple(n for n in dict.fromkeys(no_signal) if n in set(truth_list))
    dropped = set() if include_no_signal else set(marked)
    # promoted (InterpBench-compatible): a head edge is left out when all its truth q/k/v edges are
    labels = np.array([n in truth for n in graph.head_edge_names])
    kept_truth = truth_head_edges(graph, [n for n in truth_list if n not in dropped]) if dropped else truth
    keep_h = np.array([not (n in truth and n not in kept_truth) for n in graph.head_edge_names])
    qkv = all(graph.has_edge(n) for n in truth_list)  # q/k/v granularity, when the truth has the detail
    labels_q = keep_q = None
    if qkv:
        truth_set = set(truth_list)
        labels_q = np.fromiter((e.name in truth_set for e in graph.edges), dtype=bool, count=graph.n_edges)
        keep_q = np.fromiter((e.name not in dropped for e in graph.edges), dtype=bool, count=graph.n_edges)
    return EdgeLabels(frozenset(truth), marked, qkv, labels_q, keep_q, labels, keep_h)


def score_against_truth(graph: Graph, doc: Mapping, truth_edges: Iterable[str],
                        signed: bool | None = None, no_signal: Iterable[str] = (),
                        include_no_signal: bool = False, floor: bool = True) -> GroundTruthScore:
    """Edge- and node-level ROC/AUROC and precision/recall of an (already checked) edge-scores
    document against ground-truth edges (q/k/v or head names). ``signed=None``: by the method
    (see :func:`signed_ranking`). ``no_signal``: ground-truth edges that cannot carry signal, left
    out of the edge ROC (both granularities) unless ``include_no_signal``. ``floor``: scores below
    the document's numerical resolution tie with 0 (:mod:`cbench.scoring.resolution`)."""
    if signed is None:
        signed = signed_ranking(doc)
    lab = edge_labels(graph, truth_edges, no_signal=no_signal, include_no_signal=include_no_signal)
    truth = lab.truth_heads
    raw, flags = _edge_vector(graph, doc)
    scores, score_floor = floor_scores(raw, doc, signed=signed) if floor else (raw, None)
    head_scores = head_level_scores(graph, scores, signed=signed)

    labels, keep_h = lab.head_labels, lab.head_keep
    head_flags = in_graph_head_edges(graph, flags)
    promoted_roc = _roc(head_scores[keep_h], labels[keep_h], "after promotion")
    promoted_pr = precision_recall(head_flags[keep_h], labels[keep_h])

    if lab.qkv:
        labels_q, keep_q = lab.edge_labels, lab.edge_keep
        vals = scores if signed else np.abs(scores)
        edge_roc = _roc(vals[keep_q], labels_q[keep_q], "")
        edge_pr = precision_recall(flags[keep_q], labels_q[keep_q])
        n_edges, n_true = int(keep_q.sum()), int((labels_q & keep_q).sum())
        lifted = labels_q & keep_q & (raw != 0) & (scores == 0)
    else:
        edge_roc, edge_pr = promoted_roc, promoted_pr
        n_edges, n_true = int(keep_h.sum()), int((labels & keep_h).sum())
        raw_heads = head_level_scores(graph, raw, signed=signed)
        lifted = labels & keep_h & (raw_heads != 0) & (head_scores == 0)

    names = scored_nodes(graph)
    true_nodes = set()
    for name in truth:
        src, dst, _ = parse_edge_name(name)
        true_nodes.update((src, dst))
    node_labels = np.array([n in true_nodes for n in names])
    given = node_scores_given(graph, doc, signed=signed, floor=floor)
    node_scores = given if given is not None else node_scores_from_edges(graph, head_scores)
    if node_labels.all() or not node_labels.any():
        # every (or no) head and MLP is in the circuit: node ROC is undefined; report it as NaN
        node_roc = RocCurve(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([np.inf, 0.0]),
                            math.nan, int(node_labels.sum()), int((~node_labels).sum()))
    else:
        node_roc = roc_curve(node_scores, node_labels)

    node_flags = in_graph_nodes(graph, doc, head_flags)
    return GroundTruthScore(
        edge_roc=edge_roc, node_roc=node_roc, edge_pr=edge_pr,
        node_pr=precision_recall(node_flags, node_labels),
        n_head_edges=len(graph.head_edge_names), n_true_edges=n_true, n_nodes=len(names),
        n_true_nodes=int(node_labels.sum()), node_scores_source="given" if given is not None else "edges",
        signed=signed, granularity="qkv" if lab.qkv else "head", promoted_roc=promoted_roc, promoted_pr=promoted_pr,
        n_edges=n_edges, n_true_head_edges=int((labels & keep_h).sum()), no_signal_edges=lab.marked,
        no_signal_included=bool(include_no_signal and lab.marked), floor=score_floor,
        n_truth_sub_resolution=int(lifted.sum()))
