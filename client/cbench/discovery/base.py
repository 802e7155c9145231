"""What every discovery method shares: hyperparameter specs and validation, the prepared context
(runtime, data, metric, ablated activations) and the typed result.

Scores convention: metrics are losses (lower is better); an edge's score estimates (or measures)
how much the loss grows when that edge alone is ablated — positive means the edge helps the
task. Rank by ``abs(score)`` to find edges with any effect (MIB's CMD convention), by ``score``
for helpful ones (CPR).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.graph import Graph
from cbench.metrics import Metric, check_metric, default_metric, make_metric
from cbench.runtime import ABLATIONS, CircuitRuntime, as_runtime
from cbench.task_data import TaskData


# ---------------------------------------------------------------------------- hyperparameters
@dataclass(frozen=True)
class Param:
    type: type
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    doc: str = ""
    low_inclusive: bool = True

    def convert(self, method: str, name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            if self.type is bool and isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    v: Any = True
                elif value.lower() in ("0", "false", "no", "off"):
                    v = False
                else:
                    raise ValueError
            elif self.type is int and isinstance(value, str):
                v = int(float(value)) if float(value).is_integer() else int(value)
            else:
                v = self.type(value)
        except (TypeError, ValueError):
            raise UsageError(f"{method}: {name} must be {self.type.__name__} (got {value!r})") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{method}: {name} must be finite (got {value!r})")
        if self.choices is not None and v not in self.choices:
            raise UsageError(f"{method}: {name} must be one of {', '.join(map(str, self.choices))} (got {value!r})")
        if self.low is not None and (v < self.low or (v == self.low and not self.low_inclusive)):
            op = ">=" if self.low_inclusive else ">"
            raise UsageError(f"{method}: {name} must be {op} {self.low} (got {value!r})")
        if self.high is not None and v > self.high:
            raise UsageError(f"{method}: {name} must be <= {self.high} (got {value!r})")
        return v


COMMON_PARAMS: dict[str, Param] = {
    "ablation": Param(str, "resample", choices=ABLATIONS, doc="how ablated edges are replaced"),
    "top_n": Param(int, None, low=1, doc="in_graph = the top_n edges by |score| (overrides rel_threshold)"),
    "rel_threshold": Param(float, 0.05, low=0.0, high=1.0,
                           doc="in_graph = |score| >= rel_threshold * max |score| (score-ranking methods)"),
    "seed": Param(int, 0, low=0, doc="random seed"),
}


def validate_params(method: str, spec: Mapping[str, Param], given: Mapping[str, Any]) -> dict[str, Any]:
    """Typed, range-checked hyperparameters with defaults filled in; one-line UsageError otherwise."""
    out = {}
    for k in given:
        if k not in spec:
            from cbench.errors import did_you_mean

            raise UsageError(f"{method}: unknown hyperparameter {k!r}{did_you_mean(k, spec)}; "
                             f"it takes: {', '.join(sorted(spec))}")
    for k, p in spec.items():
        out[k] = p.convert(method, k, given[k]) if k in given else p.default
    return out


# ---------------------------------------------------------------------------- context
@dataclass
class Context:
    """Everything a method needs, prepared once."""

    runtime: CircuitRuntime
    data: TaskData
    metric_name: str
    metric: Metric  # bound to the clean outputs / labels of data.base
    ablation: str
    _ablated: torch.Tensor | None  # [F, B|1, P|1, D]; None: computed when first asked for
    clean_outputs: torch.Tensor
    progress: bool = True
    clean_acts: torch.Tensor | None = None  # [F, B, P, D] node outputs on data.base
    reference_is_clean: bool = False  # the metric compares with the clean model (no labels, or kl/l2)

    @property
    def graph(self) -> Graph:
        return self.runtime.graph

    @property
    def ablated(self) -> torch.Tensor:
        """Every node's ablated output ``[F, B|1, P|1, D]`` (computed on first use unless a method
        supplied it from a pass it runs anyway, e.g. EAP-IG-inputs' alpha = 0 block)."""
        if self._ablated is None:
            self._ablated = self.runtime.ablated_outputs(self.data.base, self.data.source, self.ablation,
                                                         reference=self.data.source)
        return self._ablated

    @ablated.setter
    def ablated(self, value: torch.Tensor) -> None:
        self._ablated = value


def prepare(model, data: TaskData, method: str, metric: str | None = None, ablation: str = "resample",
            progress: bool = True) -> Context:
    rt = as_runtime(model)
    metric_name = check_metric(metric or default_metric(method, data.task_type), data.task_type)
    if ablation not in ABLATIONS:
        raise UsageError(f"unknown ablation {ablation!r}; choose one of: {', '.join(ABLATIONS)}")
    base = rt.tokens_tensor(data.base)
    paired = (ablation == "resample" and data.source is not None
              and tuple(torch.as_tensor(data.source).shape) == tuple(base.shape))
    # EAP-IG-inputs with resample ablation gets the ablated outputs from its alpha = 0 rows
    # (exactly the run on the source inputs), so the separate pass is left to whoever asks;
    # methods that ablate nothing (IFR) never ask
    lazy = (method == "eap-ig-inputs" and paired) or not ablates(method)
    ablated = None
    # one fused pass (not the model's own order of operations) gives the clean outputs and every
    # node's clean output, and with paired sources their ablated outputs too: computed the same
    # way, a node's clean and ablated outputs are equal exactly when they should be. Where the
    # clean argmax is the reference (ce without labels), rows near a tie are rerun exactly.
    with torch.no_grad():
        if paired and not lazy:
            clean, clean_acts, ablated = rt.paired_outputs(base, data.source)
        else:
            res = rt.plain_pass(base)
            clean, clean_acts = res.output, res.acts
        if data.task_type == "categorical" and data.labels is None and metric_name == "ce":
            clean = rt.clean_for_reference(base, clean, data.valid)
    labels = data.labels
    if metric_name in ("kl", "l2"):
        labels = None
    m = make_metric(metric_name, data.task_type, clean_outputs=clean, labels=labels, valid=data.valid)
    if ablation == "optimal":
        ablated = optimal_ablated(rt, data, base, clean, progress)
    if ablated is None and not lazy:
        ablated = rt.ablated_outputs(base, data.source, ablation, reference=data.source)
    return Context(rt, data, metric_name, m, ablation, ablated, clean, progress, clean_acts,
                   reference_is_clean=labels is None and metric_name in ("kl", "l2", "mae", "mse"))


def ablates(method: str) -> bool:
    """Whether ``method`` takes an ablation (its hyperparameters have ``ablation``)."""
    from cbench.discovery import METHODS

    spec = METHODS.get(method)
    return spec is None or "ablation" in spec.params


def optimal_ablated(rt: CircuitRuntime, data: TaskData, base: torch.Tensor, clean: torch.Tensor,
                    progress: bool = False) -> torch.Tensor:
    """Optimal-ablation values ``[F, 1, 1, D]`` for ``rt``, learned on ``data`` (the task loss:
    cross-entropy against the labels, numerical tasks: squared error; the clean model's
    answers where the data has no labels) or read from the per-model cache; also put on the
    runtime so later passes can ask for ``ablation="optimal"``."""
    from cbench.runtime import optimal_ablation

    name = "ce" if data.task_type == "categorical" else "mse"
    task_loss = make_metric(name, data.task_type, clean_outputs=clean, labels=data.labels, valid=data.valid)
    vectors, _cached = optimal_ablation.load_or_learn(rt, base, task_loss, progress=progress)
    optimal_ablation.use(rt, vectors)
    return rt.ablated_outputs(base, ablation="optimal")


# ---------------------------------------------------------------------------- result
@dataclass
class DiscoveryResult:
    """Scores for every edge of ``graph`` (in graph order) and the circuit the method proposes."""

    method: str
    hyperparameters: dict
    graph: Graph
    scores: np.ndarray  # float64 [n_edges]
    in_graph: np.ndarray  # bool [n_edges]
    metric: str
    ablation: str
    data: dict  # split, n_examples, dataset, revision, origin...
    runtime_s: float
    node_scores: dict[str, float] | None = None
    extra: dict = field(default_factory=dict)

    def edge_scores(self) -> dict[str, float]:
        return {e.name: float(s) for e, s in zip(self.graph.edges, self.scores)}

    def circuit_edges(self) -> list[str]:
        return self.graph.edges_of_mask(self.in_graph)

    def nodes_in_graph(self) -> dict[str, bool]:
        touched = self.graph.nodes_of(self.circuit_edges())
        return {n: (n in touched) for n in self.graph.node_names}


def circuit_from_scores(scores: np.ndarray, top_n: int | None, rel_threshold: float | None) -> np.ndarray:
    a = np.abs(np.asarray(scores, dtype=np.float64))
    if top_n is not None:
        out = np.zeros(a.shape, dtype=bool)
        out[np.argsort(-a, kind="stable")[: min(top_n, a.size)]] = True
        return out
    mx = a.max() if a.size else 0.0
    if mx <= 0:
        return np.zeros(a.shape, dtype=bool)
    return a >= (rel_threshold or 0.0) * mx


def finish(ctx: Context, method: str, params: dict, scores, in_graph=None, t0: float | None = None,
           node_scores=None, extra=None) -> DiscoveryResult:
    scores = np.asarray(scores.detach().cpu().numpy() if isinstance(scores, torch.Tensor) else scores,
                        dtype=np.float64)
    scores = np.where(np.isfinite(scores), scores, 0.0)
    if in_graph is None:
        in_graph = circuit_from_scores(scores, params.get("top_n"), params.get("rel_threshold"))
    # in_graph holds only edges on an input -> logits path of the circuit (MIB/EAP-IG pruning)
    in_graph = ctx.graph.prune_dangling(in_graph)
    hp = {k: v for k, v in params.items() if v is not None}
    hp["metric"] = ctx.metric_name
    return DiscoveryResult(method, hp, ctx.graph, scores, in_graph, ctx.metric_name,
                           ctx.ablation, ctx.data.data_block(), float(time.perf_counter() - (t0 or time.perf_counter())),
                           node_scores, extra or {})


def progress_bar(total: int, desc: str, enabled: bool = True):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, mininterval=1.0, delay=1.0)
