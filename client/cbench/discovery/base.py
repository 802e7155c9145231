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
from cbench.graph.graph import Graph
from cbench.tasks.metrics import Metric, check_metric, default_metric, make_metric, metric_slice
from cbench.runtime import ABLATIONS, CircuitRuntime, as_runtime
from cbench.runtime.clean_pass import near_tie_rows
from cbench.tasks.data import TaskData


# ---------------------------------------------------------------------------- hyperparameters
MAX_PARAM_INT = 2**31 - 1  # no count, size or seed of a method is larger; a bigger one is a typo
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
                try:
                    v = int(value)
                except ValueError:  # 1e3, 64.0
                    v = int(float(value)) if float(value).is_integer() else int(value)
            else:
                v = self.type(value)
        except (TypeError, ValueError):
            raise UsageError(f"{method}: {name} must be {self.type.__name__} (got {value!r})") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{method}: {name} must be finite (got {value!r})")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_PARAM_INT:
            raise UsageError(f"{method}: {name} {value!r} is out of range (at most {MAX_PARAM_INT} in size)")
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
    "protocol": Param(str, None, choices=("cbench", "mib"),
                      doc="cbench (the default): as the paper defines the method; mib: as MIB's reference "
                          "code runs it (docs/mib-parity.md)"),
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
    """Everything a method needs, prepared once. The clean pass over ``data.base`` (its outputs,
    every node's output, and the metric bound to them) runs when first asked for: methods whose
    own gradient pass is at the clean point (EAP, NAP) take them from that pass instead
    (:func:`clean_point_gradients`) and never run it."""

    runtime: CircuitRuntime
    data: TaskData
    metric_name: str
    ablation: str
    _ablated: torch.Tensor | None  # [F, B|1, P|1, D]; None: computed when first asked for
    progress: bool = True
    reference_is_clean: bool = False  # the metric compares with the clean model (no labels, or kl/l2)
    metric_labels: torch.Tensor | None = None  # what the metric compares with (None: the clean model)
    _clean: tuple[torch.Tensor, torch.Tensor] | None = None  # (outputs [B, P, V], node outputs [F, B, P, D])
    _metric: Metric | None = None
    notes: dict = field(default_factory=dict)  # said in the result's extra (e.g. how MIB's optimal ablation ran)

    @property
    def graph(self) -> Graph:
        return self.runtime.graph

    @property
    def clean_outputs(self) -> torch.Tensor:
        """The clean model's outputs on ``data.base`` (near-tie rows exact, see :meth:`reference_outputs`)."""
        return self._clean_pass()[0]

    @property
    def clean_acts(self) -> torch.Tensor:
        """Every node's output on ``data.base`` ``[F, B, P, D]``."""
        return self._clean_pass()[1]

    def _clean_pass(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._clean is None:
            base = self.runtime.tokens_tensor(self.data.base)
            with torch.no_grad():
                res = self.runtime.plain_pass(base)
            self._clean = (self.reference_outputs(base, res.output), res.acts)
        return self._clean

    @property
    def argmax_reference(self) -> bool:
        """Whether the metric's reference is the clean model's argmax (ce without labels), whose
        near-tie rows :meth:`reference_outputs` reruns in the model's own arithmetic."""
        return self.data.task_type == "categorical" and self.metric_labels is None and self.metric_name == "ce"

    def reference_outputs(self, tokens: torch.Tensor, outputs: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Clean ``outputs`` of a fused pass over ``tokens`` (examples ``start..``) as the metric's
        reference: where that is the clean argmax (ce without labels), rows near a tie are rerun
        in the model's own arithmetic (:meth:`CircuitRuntime.clean_for_reference`)."""
        outputs = outputs.detach()
        if self.argmax_reference:
            return self.runtime.clean_for_reference(tokens, outputs, self.valid_rows(start, len(tokens)))
        return outputs

    def valid_rows(self, start: int, n: int):
        """``data.valid`` of examples ``start .. start + n`` (None when every position counts)."""
        return None if self.data.valid is None else self.data.valid[start:start + n]

    @property
    def metric(self) -> Metric:
        """The metric bound to the clean outputs / labels of ``data.base``."""
        if self._metric is None:
            self._metric = self.metric_for(self.clean_outputs)
        return self._metric

    def metric_for(self, clean_outputs: torch.Tensor | None, start: int = 0, stop: int | None = None) -> Metric:
        """The metric of examples ``start:stop`` bound to ``clean_outputs`` (theirs) or the labels."""
        labels = None if self.metric_labels is None else torch.as_tensor(self.metric_labels)[start:stop]
        valid = None if self.data.valid is None else self.data.valid[start:stop]
        return make_metric(self.metric_name, self.data.task_type, clean_outputs=clean_outputs, labels=labels,
                           valid=valid)

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


# methods whose gradient pass is at the clean point: they take the clean outputs from it
OWN_CLEAN_PASS = ("eap", "nap")


def prepare(model, data: TaskData, method: str, metric: str | None = None, ablation: str = "resample",
            progress: bool = True, protocol: str | None = None) -> Context:
    rt = as_runtime(model)
    metric_name = check_metric(metric or default_metric(method, data.task_type), data.task_type)
    if ablation not in ABLATIONS:
        raise UsageError(f"unknown ablation {ablation!r}; choose one of: {', '.join(ABLATIONS)}")
    base = rt.tokens_tensor(data.base)
    paired = (ablation == "resample" and data.source is not None
              and tuple(torch.as_tensor(data.source).shape) == tuple(base.shape))
    labels = None if metric_name in ("kl", "l2") else data.labels
    ctx = Context(rt, data, metric_name, ablation, None, progress,
                  reference_is_clean=labels is None and metric_name in ("kl", "l2", "mae", "mse"),
                  metric_labels=labels)
    # EAP-IG-inputs with resample ablation gets the ablated outputs from its alpha = 0 rows
    # (exactly the run on the source inputs), so the separate pass is left to whoever asks;
    # methods that ablate nothing (IFR) never ask
    lazy = (method == "eap-ig-inputs" and paired) or not ablates(method)
    if paired and not lazy and method not in OWN_CLEAN_PASS:
        # one fused pass (not the model's own order of operations) over base and source rows gives
        # the clean outputs, every node's clean output and their ablated outputs: computed the same
        # way, a node's clean and ablated outputs are equal exactly when they should be
        with torch.no_grad():
            clean, clean_acts, ctx.ablated = rt.paired_outputs(base, data.source)
        ctx._clean = (ctx.reference_outputs(base, clean), clean_acts)
    if ablation == "optimal" and protocol == "mib":  # as MIB's oa.py (runtime/optimal_ablation_mib.py)
        from cbench.runtime.optimal_ablation_mib import mib_optimal_ablated

        name = "ce" if data.task_type == "categorical" else "mse"
        loss = make_metric(name, data.task_type, clean_outputs=ctx.clean_outputs, labels=data.labels, valid=data.valid)
        ctx.ablated, ctx.notes["optimal_ablation"] = mib_optimal_ablated(rt, base, loss)
    elif ablation == "optimal":
        ctx.ablated = optimal_ablated(rt, data, base, ctx.clean_outputs, progress)
    if ctx._ablated is None and not lazy:
        ctx.ablated = rt.ablated_outputs(base, data.source, ablation, reference=data.source)
    return ctx


def clean_point_gradients(ctx: Context, start: int, stop: int, ablated: torch.Tensor, same_pass: bool = False):
    """One gradient pass of examples ``start:stop`` at the clean point (no node ablated): ``(d
    metric / d input of every destination [K, n, P, D], every node's clean output [F, n, P, D])``.

    The metric's clean reference comes from the pass's own outputs (``same_pass``: as the
    reference of a metric that compares with the clean model, which then has exactly zero
    difference at this point; otherwise the clean argmax for ce, near-tie rows rerun exactly);
    labels when the metric has them. When the context's clean pass has run already its node
    outputs are used, as before."""
    rt = ctx.runtime
    tokens = rt.tokens_tensor(ctx.data.base[start:stop])
    own = ctx._clean is None
    exact: dict = {}  # the reference, once near-tie rows were rerun

    def metric_fn(out):
        if not own:
            m = metric_slice(ctx.metric, start, stop)
            return m.same_pass(out, out) if same_pass else m(out)
        ref = exact.get("reference")
        if ref is None:
            ref = out.detach()
            if ctx.argmax_reference and len(near_tie_rows(ref, ctx.valid_rows(start, len(tokens)))):
                raise _RerunNearTies(ref)
        m = ctx.metric_for(ref, start, stop)  # (labels live where it does)
        return m.same_pass(out, out) if same_pass else m(out)

    if not own:
        grads, _ = rt.input_gradients(tokens, metric_fn, ablated=ablated)
        return grads, ctx.clean_acts[:, start:stop]
    try:
        grads, _, acts = rt.input_gradients(tokens, metric_fn, ablated=ablated, first_block_acts=True)
        return grads, acts
    except _RerunNearTies as e:
        outputs = e.outputs
    # Near-tie rows are rerun in the model's own arithmetic, a full forward (with TransformerLens's
    # copy of W_U, 2 GB at Llama-3.1-8B's vocabulary): not while the pass's graph holds its own
    # copies, but after it is gone (it went with the exception), then the pass again with that
    # reference. The same numbers as rerunning inside the pass; the peak the larger of the two.
    exact["reference"] = ctx.reference_outputs(tokens, outputs, start)
    del outputs
    grads, _, acts = rt.input_gradients(tokens, metric_fn, ablated=ablated, first_block_acts=True)
    return grads, acts


class _RerunNearTies(Exception):
    """Raised by a gradient pass's metric when its argmax reference has near-tie rows to rerun."""

    def __init__(self, outputs: torch.Tensor):
        super().__init__("near-tie rows to rerun")
        self.outputs = outputs


def ablates(method: str) -> bool:
    """Whether ``method`` takes an ablation (its hyperparameters have ``ablation``)."""
    from cbench.discovery.registry import METHODS

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
    scores = np.asarray(scores.detach().double().cpu().numpy() if isinstance(scores, torch.Tensor) else scores,
                        dtype=np.float64)
    scores = np.where(np.isfinite(scores), scores, 0.0)
    if in_graph is None:
        in_graph = circuit_from_scores(scores, params.get("top_n"), params.get("rel_threshold"))
    # in_graph holds only edges on an input -> logits path of the circuit (MIB/EAP-IG pruning)
    in_graph = ctx.graph.prune_dangling(in_graph)
    hp = {k: v for k, v in params.items() if v is not None}
    hp["metric"] = ctx.metric_name
    if ctx.notes:  # e.g. how MIB's optimal ablation was learned
        extra = dict(extra or {}, **ctx.notes)
    # the type the scores were computed in: their numerical resolution follows from it (scoring/resolution.py)
    extra = dict(extra or {}, dtype=str(ctx.runtime.dtype).removeprefix("torch."))
    return DiscoveryResult(method, hp, ctx.graph, scores, in_graph, ctx.metric_name,
                           ctx.ablation, ctx.data.data_block(), float(time.perf_counter() - (t0 or time.perf_counter())),
                           node_scores, extra or {})


def progress_bar(total: int, desc: str, enabled: bool = True):
    """k of ``total`` with an ETA on standard error from the first unit on, kept on screen when
    done; off when standard error is not a terminal (logs get no carriage-return redraws)."""
    import sys

    from tqdm.auto import tqdm

    tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
    return tqdm(total=total, desc=desc, disable=not (enabled and tty), leave=True, mininterval=0.5, file=sys.stderr)
