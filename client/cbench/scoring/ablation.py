"""Ablations: outputs, accuracy and metric of a model with nodes or edges ablated, and per-node
effects (InterpBench section 5 and appendix B). One implementation, used by ``cbench ablate``
and by the SIIT builder's verification.

* :func:`ablate` — ablate the named nodes or edges (or, with ``complement=True``, everything
  but them: the circuit run) with ``resample`` (paired source input), ``mean`` (over the source
  inputs as reference set, per position) or ``zero`` ablation; returns outputs, accuracy and the
  metric against the clean model.
* :func:`node_effects` — for every head and MLP and every ablation kind: the effect
  ``mean 1[output under ablation != y_b]`` over valid positions (``y_b``: the label, or the clean
  model's output when the data has no labels; numerical outputs count as equal within ``atol``,
  0.05 as in InterpBench) and the normalized KL
  ``d_V = (KL(IntInv, y_b) - KL(M(x_b), y_b)) / (KL(M(x_s), y_b) - KL(M(x_b), y_b))``
  where KL against a one-hot label is the cross-entropy; for numerical tasks the squared error
  takes KL's place. All nodes of one kind run as one batch of node masks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.metrics import check_metric, default_metric, make_metric
from cbench.runtime import ABLATIONS, CircuitRuntime, as_runtime, edge_names_to_mask
from cbench.tasks.data import TaskData

ATOL = 0.05


@dataclass
class AblationResult:
    kind: str
    ablated_nodes: list[str]
    ablated_edges: list[str]
    n_examples: int
    metric: str
    metric_value: float
    accuracy: float
    clean_accuracy: float
    outputs: torch.Tensor = field(repr=False, default=None)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "ablated_nodes": self.ablated_nodes,
                "n_ablated_edges": len(self.ablated_edges), "n_examples": self.n_examples,
                "metric": self.metric, "metric_value": self.metric_value, "accuracy": self.accuracy,
                "clean_accuracy": self.clean_accuracy}


@dataclass
class NodeEffect:
    node: str
    kind: str
    effect: float
    normalized_kl: float

    def to_dict(self) -> dict:
        return {"node": self.node, "kind": self.kind, "effect": self.effect, "normalized_kl": self.normalized_kl}


def _targets(rt: CircuitRuntime, data: TaskData, clean: torch.Tensor) -> torch.Tensor:
    """y_b: labels if the data has them per position, else the clean model's predictions (also for
    a real model's (correct, wrong) answer pairs, ``labels [B, 2]``)."""
    if data.labels is not None and tuple(data.labels.shape) == tuple(data.valid.shape):
        return data.labels
    return clean.argmax(-1) if data.task_type == "categorical" else clean[..., 0]


def correct(outputs: torch.Tensor, targets: torch.Tensor, task_type: str, atol: float = ATOL) -> torch.Tensor:
    """Boolean ``[..., B, P]``: output equals the target (argmax, or within ``atol``)."""
    if task_type == "categorical":
        return outputs.argmax(-1) == targets
    return (outputs[..., 0] - targets.to(outputs.dtype)).abs() <= atol


def _mean_valid(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    w = valid.to(torch.float64)
    return (x.to(torch.float64) * w).sum((-1, -2)) / w.sum().clamp(min=1)


def _divergence(outputs: torch.Tensor, targets: torch.Tensor, task_type: str) -> torch.Tensor:
    """Per-position KL to a one-hot target (= cross-entropy) or squared error."""
    if task_type == "categorical":
        logp = torch.log_softmax(outputs, -1)
        idx = targets.long().clamp(min=0).expand(outputs.shape[:-1])[..., None]
        return -logp.gather(-1, idx)[..., 0]
    return (outputs[..., 0] - targets.to(outputs.dtype)) ** 2


def ablate(model, data: TaskData, nodes: Iterable[str] | None = None, edges: Iterable[str] | None = None,
           kind: str = "resample", metric: str | None = None, complement: bool = False,
           atol: float = ATOL) -> AblationResult:
    """Run ``model`` on ``data.base`` with the named nodes/edges ablated (``complement``: all but
    them). Returns outputs, accuracy (against ``y_b``) and ``metric`` against the clean model."""
    rt = as_runtime(model)
    g = rt.graph
    if kind not in ABLATIONS:
        raise UsageError(f"unknown ablation kind {kind!r}; choose one of: {', '.join(ABLATIONS)}")
    nodes = list(nodes or [])
    edges = list(edges or [])
    if not nodes and not edges and not complement:
        raise UsageError("name the nodes or edges to ablate (--nodes or --edges)")
    for n in nodes:
        g.node(n)
        if n == "logits":
            raise UsageError("'logits' writes nothing to ablate; name heads, MLPs or 'input'")
    edge_keep = ~edge_names_to_mask(g, edges) if edges else np.ones(g.n_edges, dtype=bool)
    node_keep = np.array([n not in set(nodes) for n in g.forward_nodes])
    if complement:
        if edges:
            edge_keep = ~edge_keep
            if nodes:  # edges between the named nodes too
                edge_keep |= g.node_mask_to_edge_mask(nodes)
        elif nodes:
            edge_keep = g.node_mask_to_edge_mask(nodes)
        else:
            edge_keep = np.zeros(g.n_edges, dtype=bool)
        node_keep = np.ones(g.n_forward, dtype=bool)
    base = rt.tokens_tensor(data.base)
    with torch.no_grad():
        clean = rt.clean(base)
        abl = rt.ablated_outputs(base, data.source, kind, reference=data.source)
        out = rt.run(base, edge_mask=torch.as_tensor(edge_keep, dtype=rt.dtype),
                     node_mask=torch.as_tensor(node_keep, dtype=rt.dtype), ablated=abl).output
    metric_name = check_metric(metric or default_metric("ablation", data.task_type), data.task_type)
    labels = None if metric_name in ("kl", "l2") else data.labels
    m = make_metric(metric_name, data.task_type, clean_outputs=clean, labels=labels, valid=data.valid)
    targets = _targets(rt, data, clean)
    acc = float(_mean_valid(correct(out, targets, data.task_type, atol), data.valid))
    clean_acc = float(_mean_valid(correct(clean, targets, data.task_type, atol), data.valid))
    ablated_edges = [e.name for e, k in zip(g.edges, edge_keep) if not k]
    ablated_nodes = [n for n, k in zip(g.forward_nodes, node_keep) if not k]
    return AblationResult(kind, ablated_nodes, ablated_edges, data.n_examples, metric_name, float(m(out)), acc,
                          clean_acc, out)


def node_effects(model, data: TaskData, nodes: Sequence[str] | None = None,
                 kinds: Sequence[str] = ("resample", "mean", "zero"), atol: float = ATOL) -> list[NodeEffect]:
    """Effect and normalized KL of ablating each node alone (default: every head and MLP)."""
    rt = as_runtime(model)
    g = rt.graph
    if nodes is None:
        nodes = [n for n in g.forward_nodes if n != "input"]
    for n in nodes:
        g.forward_index(g.node(n).name)
    for k in kinds:
        if k not in ABLATIONS:
            raise UsageError(f"unknown ablation kind {k!r}; choose one of: {', '.join(ABLATIONS)}")
    base = rt.tokens_tensor(data.base)
    valid = data.valid
    with torch.no_grad():
        clean = rt.clean(base)
        src_out = rt.clean(data.source)
        y = _targets(rt, data, clean)
        d_base = _mean_valid(_divergence(clean, y, data.task_type), valid)
        d_src = _mean_valid(_divergence(src_out, y, data.task_type), valid)
        node_masks = torch.ones(len(nodes), g.n_forward, dtype=rt.dtype)
        for i, n in enumerate(nodes):
            node_masks[i, g.forward_index(n)] = 0.0
        ones = torch.ones(len(nodes), g.n_edges, dtype=rt.dtype)
        results = []
        for kind in kinds:
            abl = rt.ablated_outputs(base, data.source, kind, reference=data.source)
            outs = rt.run_masks(base, ones, ablated=abl, node_masks=node_masks)  # [n_nodes, B, P, V]
            eff = 1.0 - _mean_valid(correct(outs, y, data.task_type, atol), valid)
            d_int = _mean_valid(_divergence(outs, y, data.task_type), valid)
            denom = d_src - d_base
            nkl = (d_int - d_base) / denom if abs(float(denom)) > 1e-12 else torch.full_like(d_int, float("nan"))
            for i, n in enumerate(nodes):
                results.append(NodeEffect(n, kind, float(eff[i]), float(nkl[i])))
    return results
