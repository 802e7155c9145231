"""MIB's neuron-level circuits and neuron ablation (``--protocol mib`` for NAP, MIB's
``run_evaluation.py --level neuron``), as the EAP-IG library MIB pins computes them
(``hannamw/EAP-IG`` branch ``MIB``, ``graph.py`` and ``evaluate.py``):

* **Scores**: one per neuron, a dimension d of a forward node's output (the ``input`` node's
  ``hook_embed``, each head's ``attn.hook_result``, each MLP's ``hook_mlp_out``): ``[F, d_model]``,
  MIB's ``neurons_scores`` (a NAP document under ``--protocol mib`` carries them as
  ``nodes[name].neurons_scores``, the key of MIB's graph JSON).
* **Circuits** (``Graph.apply_topn(n, absolute, level='neuron', prune=True)``): the n neurons of
  highest score (signed for CPR, |score| for CMD), n = ``int(k · F · d_model)`` at each size k
  (``evaluate_area_under_curve`` counts neurons, not edges). A node with a chosen neuron enters
  the graph with every outgoing edge; pruning then removes nothing (each such node keeps its
  edge to the logits, and an incoming edge: the reference sets edges from a node to every
  destination slot, its own and earlier ones included, and counts those for pruning).
* **Ablation** (``evaluate_graph`` with ``neurons_in_graph``): an edge counts as in the circuit
  only if its source has *all* its neurons in it, and the patch into each destination is the
  (ablated − actual) difference masked by the neurons *not* in the circuit. So every node's
  output, wherever it is read, is its actual output on the chosen neurons and the ablated one
  on the others: a node with no chosen neuron is ablated entirely, a node with every neuron
  chosen is never ablated. That is a node mask with one entry per neuron
  (:func:`cbench.runtime.masks.mix_node_outputs` with rows ``[C, F, D]``).

f(C), CPR and CMD are then :mod:`cbench.scoring.faithfulness`'s, over the same grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import CbenchError, UsageError
from cbench.scoring.faithfulness import (
    SIZE_GRID,
    FaithfulnessCurve,
    FaithfulnessResult,
    task_metric,
)

__all__ = [
    "document_faithfulness",
    "faithfulness_figures_of",
    "evaluate_neuron_faithfulness",
    "neuron_circuits_at_sizes",
    "neuron_faithfulness_of_circuits",
    "neuron_scores_of",
]


def neuron_scores_of(graph, doc: Mapping, d_model: int | None = None) -> np.ndarray | None:
    """``[F, d_model]`` neuron scores of an edge-scores document (``nodes[name].neurons_scores``
    for every forward node), or None when it has none. A document that has them for some nodes
    only, or of the wrong width, is a UsageError."""
    nodes = doc.get("nodes") or {}
    rows = [(nodes.get(n) or {}).get("neurons_scores") if isinstance(nodes.get(n), Mapping) else None
            for n in graph.forward_nodes]
    if all(r is None for r in rows):
        return None
    missing = [n for n, r in zip(graph.forward_nodes, rows) if r is None]
    if missing:
        raise UsageError(f"the scores give neurons_scores for some nodes but not for {', '.join(missing[:4])}"
                         + (" ..." if len(missing) > 4 else "") + "; neuron-level circuits need every node's")
    widths = {len(r) if isinstance(r, list) else -1 for r in rows}
    if len(widths) != 1 or (d_model is not None and widths != {d_model}) or widths == {0}:
        raise UsageError(f"neurons_scores must be lists of d_model ({d_model}) numbers for every node")
    out = np.asarray(rows, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise UsageError("neurons_scores must be finite numbers")
    return out


def neuron_circuits_at_sizes(scores, grid: Sequence[float] = SIZE_GRID, absolute: bool = False) -> np.ndarray:
    """Boolean neuron masks ``[len(grid), F, D]``: the top ``int(k · F · D)`` neurons by signed
    (or absolute) score, in float32 as the reference holds them (ties: row-major order)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise UsageError(f"neuron scores must be [nodes, d_model], got shape {s.shape}")
    key = s.astype(np.float32).astype(np.float64).reshape(-1)
    order = np.argsort(-(np.abs(key) if absolute else key), kind="stable")
    out = np.zeros((len(grid), key.size), dtype=bool)
    for i, k in enumerate(grid):
        out[i, order[:min(key.size, int(k * key.size))]] = True
    return out.reshape(len(grid), *s.shape)


def neuron_faithfulness_of_circuits(case, data, masks: np.ndarray, grid: Sequence[float], ablation: str = "resample",
                                    metric: str | None = None, positional: bool = True, absolute: bool = False,
                                    _bound=None, protocol: str = "mib", chunk: int = 4) -> FaithfulnessCurve:
    """f of neuron circuits (boolean ``[len(grid), F, D]``); the curve's ``n_edges`` counts neurons."""
    from cbench.runtime.residual_pass import forward_resid

    rt = case.runtime
    masks = np.asarray(masks, dtype=bool)
    if masks.shape != (len(grid), rt.n_forward, rt.d_model):
        raise UsageError(f"need one neuron circuit per size: shape ({len(grid)}, {rt.n_forward}, {rt.d_model}), "
                         f"got {masks.shape}")
    metric_fn, _ = _bound if _bound is not None else task_metric(case, data, metric, protocol)
    tokens = rt.tokens_tensor(data.base)
    B = tokens.shape[0]
    all_masks = np.concatenate([np.zeros((1,) + masks.shape[1:], bool), masks, np.ones((1,) + masks.shape[1:], bool)])
    outs = []
    with torch.no_grad():
        ablated = rt.ablated_outputs(tokens, data.source, ablation, data.base, positional).to(rt.dtype)
        for s in range(0, len(all_masks), chunk):
            nm = torch.as_tensor(all_masks[s:s + chunk], dtype=rt.dtype, device=rt.device)
            out = forward_resid(rt, tokens.repeat(nm.shape[0], 1), nm, ablated).output
            outs.append(out.reshape(nm.shape[0], B, *out.shape[1:]))
        losses = metric_fn(torch.cat(outs, 0)).double().cpu().numpy()
    m = -losses
    m_empty, m_full = float(m[0]), float(m[-1])
    gap = m_full - m_empty
    if abs(gap) <= 1e-12 * max(1.0, abs(m_full)):
        f = [float("nan")] * len(grid)
    else:
        f = [float((v - m_empty) / gap) for v in m[1:-1]]
    return FaithfulnessCurve(tuple(float(k) for k in grid), tuple(int(x.sum()) for x in masks), tuple(f),
                             m_full, m_empty, tuple(float(v) for v in m[1:-1]), absolute)


def evaluate_neuron_faithfulness(case, data, neuron_scores, ablation: str = "resample", metric: str | None = None,
                                 grid: Sequence[float] = SIZE_GRID, positional: bool = True,
                                 protocol: str = "mib") -> FaithfulnessResult:
    """CPR (signed top-n neurons) and CMD (|score| top-n neurons) with neuron ablation."""
    rt = case.runtime
    scores = np.asarray(neuron_scores, dtype=np.float64)
    if scores.shape != (rt.n_forward, rt.d_model):
        raise UsageError(f"neuron scores for this model are [{rt.n_forward}, {rt.d_model}], got {scores.shape}")
    bound = task_metric(case, data, metric, protocol)
    curves = [neuron_faithfulness_of_circuits(case, data, neuron_circuits_at_sizes(scores, grid, absolute), grid,
                                              ablation, metric, positional, absolute, bound)
              for absolute in (False, True)]
    return FaithfulnessResult(curves[0].area, curves[1].distance, curves[0], curves[1], ablation, bound[0].name,
                              data.n_examples)


def document_faithfulness(case, data, doc: Mapping, protocol: str = "cbench", ablation: str = "resample",
                          metric: str | None = None, construction: str = "top-n") -> tuple[FaithfulnessResult, str]:
    """(CPR/CMD of an edge-scores document, ``"neuron"`` or ``"edge"``): under ``protocol="mib"``
    a document with neuron scores (NAP) is evaluated at MIB's neuron level, anything else over
    edges (:func:`cbench.scoring.faithfulness.evaluate_faithfulness`; ``construction="auto"``: greedy
    for the methods MIB runs greedily, IFR, else top-n)."""
    from cbench.scoring.faithfulness import edge_score_vector, evaluate_faithfulness

    if construction == "auto":  # what the method needs: greedy for IFR (MIB's run_evaluation.py), else top-n
        from cbench.discovery import METHODS

        spec = METHODS.get(str((doc.get("method") or {}).get("name")))
        construction = spec.construction if spec is not None else "top-n"
    if protocol == "mib":
        neurons = neuron_scores_of(case.graph, doc, case.runtime.d_model)
        if neurons is not None:
            return evaluate_neuron_faithfulness(case, data, neurons, ablation, metric), "neuron"
    return evaluate_faithfulness(case, data, edge_score_vector(case.graph, doc), ablation=ablation, metric=metric,
                                 construction=construction, protocol=protocol), "edge"


def faithfulness_figures(sc, data, doc: dict, protocol: str | None = None) -> dict:
    """CPR and CMD of one method's scores on one model, as the bench records them (``{"cpr", "cmd",
    "metric"[, "level"]}``, None where not finite or not defined); under the mib protocol NAP's at
    MIB's neuron level, and IOI's with MIB's logit difference."""
    return faithfulness_figures_of(sc, data, {"": doc}, protocol)[""]


def faithfulness_figures_of(sc, data, docs: Mapping[str, dict], protocol: str | None = None) -> dict[str, dict]:
    """:func:`faithfulness_figures` of several documents on one model (e.g. every method's), keyed as
    ``docs``: their edge-level circuits run in one batch, each distinct circuit once (the figures
    are those of each document on its own, :func:`cbench.scoring.faithfulness.circuit_losses`)."""
    import math

    from cbench.discovery import METHODS
    from cbench.scoring.faithfulness import circuits_of, edge_score_vector, faithfulness_of_circuit_pairs

    clean = lambda x: float(x) if math.isfinite(x) else None  # noqa: E731
    figures = lambda res, level: {"cpr": clean(res.cpr), "cmd": clean(res.cmd), "metric": res.metric,  # noqa: E731
                                  **({"level": level} if level != "edge" else {})}
    out: dict[str, dict] = {}
    pairs: dict[str, tuple] = {}
    for key, doc in docs.items():
        try:
            if protocol == "mib" and neuron_scores_of(sc.graph, doc, sc.runtime.d_model) is not None:
                out[key] = figures(*document_faithfulness(sc, data, doc, protocol="mib", construction="auto"))
                continue
            construction = "top-n"
            if protocol == "mib":  # what the method needs: greedy for IFR (MIB's run_evaluation.py), else top-n
                spec = METHODS.get(str((doc.get("method") or {}).get("name")))
                construction = spec.construction if spec is not None else "top-n"
            scores = edge_score_vector(sc.graph, doc)
            pairs[key] = tuple(circuits_of(sc, scores, absolute=absolute, construction=construction,
                                           protocol=protocol or "cbench") for absolute in (False, True))
        except CbenchError:
            out[key] = {"cpr": None, "cmd": None}
    if pairs:
        try:
            results = faithfulness_of_circuit_pairs(sc, data, list(pairs.values()), protocol=protocol or "cbench")
            out.update({key: figures(res, "edge") for key, res in zip(pairs, results)})
        except CbenchError:
            out.update({key: {"cpr": None, "cmd": None} for key in pairs})
    return {key: out[key] for key in docs}
