"""Release gates of a model, recomputed on fresh pairs: what ``cbench verify`` prints and what the
release step runs before a model is published.

A released model's ``circuit.json`` is a claim: these nodes and these edges are what the model
computes. :func:`verify_model` checks the claim with code that does not share the path that
trained the model: node interchanges through TransformerLens hooks (:mod:`cbench.tasks.interchange`)
against the Tracr model shipped in the artifact's ``tracr/``, and edge ablations through the
graph runtime.

Node gates (SIIT and IIT models; on the pairs' labelled positions, labels from the Tracr model):

* ``accuracy`` -- the model's output equals the Tracr model's (argmax, or within 0.05) >= 99.5 %;
* ``iia`` -- interchanging a high-level node in the Tracr model and its aligned low-level nodes
  in the model gives the same output, averaged over high-level nodes, >= 99.5 %;
* ``siia`` (SIIT) -- interchanging a non-aligned node leaves the output at the Tracr model's
  label, averaged over non-aligned nodes, >= 99.5 %;
* ``max_out_of_circuit_node_effect`` (SIIT) -- resample-ablating any one node outside the
  circuit changes at most 1 % of outputs.

Edge gates (SIIT and Tracr models; resample ablation, outputs compared with the model's own
unablated outputs, on every valid position):

* ``complement_edge_effect`` -- ablating every edge outside ``circuit.json`` at once changes at
  most 1 % of outputs;
* ``edge_signal`` -- every ground-truth edge, ablated alone, changes at least 1 % of outputs or
  moves the metric measurably: its exact patching score (the metric's increase when it alone is
  ablated; KL for categorical, L2 for numerical tasks, against the unablated outputs) is above
  that of every edge outside the ground truth, the floor no method can see below. An edge that
  does neither must be marked in ``circuit.json``'s ``edge_signal`` with why, and is left out of
  scoring (``unmarked_edges_without_signal``, SIIT models; Tracr models list such edges in the
  report). A marked edge must not be one the model uses (``marked_edges_with_signal``: changing
  at least 1 % of outputs *and* a patching score above the floor), so a mark cannot hide a used
  edge. Either figure alone can be noise: a position-only key moving 2.5 % of numerical outputs
  just past the tolerance with a score below the floor, or an edge moving 0.1 % of outputs on a
  model so clean that the floor is 1e-4. SIIT marks
  two kinds: edges measured to carry nothing, and edges the *program* ignores under resample
  ablation (a Select's query or key that reads only position, which base and source share), which
  training resample-ablates like the edges outside the circuit. Either way the program itself
  must ignore a marked edge (``marked_edges_the_program_uses``: the high-level edges it stands
  for, resample-ablated alone in the Tracr model, change under 1 % of its outputs), so a mark
  cannot excuse a model that skips a step of the program (a head that should copy the token
  while the model reads it off the residual stream). A hand-written high-level model (IOI) has
  no program to ablate and its edges join whole nodes: there a silent q, k or v is excused only
  while another edge of the same step carries signal (:func:`hand_written_edges_used`);
* ``oracle_edge_auroc`` -- exact activation patching of every edge, ranked against the
  ground truth without marked edges, scores edge AUROC >= 0.99 (q/k/v granularity).

Each gate runs on two sets of pairs: ``validation`` (the data's own distribution: the
counterfactuals dataset's validation split, or the trainer's validation inputs) and ``fresh``
(uniformly sampled inputs of the maximum length, with a seed of the caller's).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.labels import NO_CLASS, high_level_classes, none_class_of
from cbench.tasks.data import TaskData

MIN_ACCURACY = 0.995
MIN_IIA = 0.995
MIN_SIIA = 0.995
MAX_OUT_NODE_EFFECT = 0.01
MAX_COMPLEMENT_EFFECT = 0.01
MIN_EDGE_CHANGED = 0.01
MIN_ORACLE_AUROC = 0.99
ATOL = 0.05
GATES = {
    "accuracy": (">=", MIN_ACCURACY), "iia": (">=", MIN_IIA), "siia": (">=", MIN_SIIA),
    "max_out_of_circuit_node_effect": ("<=", MAX_OUT_NODE_EFFECT),
    "complement_edge_effect": ("<=", MAX_COMPLEMENT_EFFECT),
    "unmarked_edges_without_signal": ("<=", 0),
    "marked_edges_with_signal": ("<=", 0),
    "marked_edges_the_program_uses": ("<=", 0),
    "oracle_edge_auroc": (">=", MIN_ORACLE_AUROC),
}


@dataclass
class Gate:
    name: str
    pairs: str  # "validation" | "fresh"
    value: float
    op: str
    threshold: float
    passed: bool
    detail: str = ""


@dataclass
class EdgeSignal:
    """One ground-truth edge ablated alone: the share of outputs it changes and its exact patching
    score, the larger over the pair sets, and the largest score of an edge outside the ground truth
    (``floor``) on the pair set where this edge stood out most."""

    edge: str
    changed: float
    metric_delta: float
    floor: float
    signal: bool
    why: str | None = None
    marked: bool = False  # marked "signal": false in circuit.json (why from there)


@dataclass
class VerifyReport:
    case: str
    model_kind: str
    gates: list[Gate]
    edges: list[EdgeSignal]
    n_pairs: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    def failures(self) -> list[Gate]:
        return [g for g in self.gates if not g.passed]

    def accept_marks(self) -> None:
        """The edges without signal are now marked in circuit.json: that gate holds."""
        for g in self.gates:
            if g.name == "unmarked_edges_without_signal":
                g.value, g.passed = 0.0, True
                g.detail = "marked in circuit.json's edge_signal" if g.detail else ""

    def no_signal_marks(self) -> dict[str, dict]:
        """``circuit.json``'s ``edge_signal`` for the edges measured to carry no signal."""
        return {e.edge: {"signal": False, "why": e.why or "no measurable effect"} for e in self.edges if not e.signal}

    def to_dict(self) -> dict:
        return {"schema": "cbench/verify-report/v1", "case": self.case, "model_kind": self.model_kind,
                "passed": self.passed, "n_pairs": self.n_pairs, "gates": [asdict(g) for g in self.gates],
                "edges": [asdict(e) for e in self.edges]}

    def summary(self) -> dict:
        """The gate figures for meta.json and the card: per gate, the worse value over the pair sets."""
        out: dict[str, dict] = {}
        for g in self.gates:
            row = out.setdefault(g.name, {"op": g.op, "threshold": g.threshold, "passed": True})
            row[g.pairs] = g.value
            row["passed"] = row["passed"] and g.passed
        return out

    def format(self) -> str:
        lines = [f"case {self.case} ({self.model_kind}): "
                 + ", ".join(f"{k} {v} pairs" for k, v in self.n_pairs.items())]
        for g in self.gates:
            value = f"{g.value:.4f}" if isinstance(g.value, float) else str(g.value)
            lines.append(f"  {'PASS' if g.passed else 'FAIL'}  {g.name:<32} {g.pairs:<10} {value:>8} "
                         f"{g.op} {g.threshold:g}" + (f"  ({g.detail})" if g.detail else ""))
        for e in self.edges:
            if e.changed != e.changed:  # NaN: a stress edge, measured in its necessity context
                state = f"marked: {e.why}" if e.marked else ("above the floor" if e.signal else "BELOW THE FLOOR")
                lines.append(f"        edge {e.edge:<28} patching score in its necessity context {e.metric_delta:.2e} "
                             f"(outside the circuit at most {e.floor:.2e})  [{state}]")
                continue
            used = e.changed >= MIN_EDGE_CHANGED and e.metric_delta > e.floor
            mark = (f"marked: {e.why}" + ("; USED BY THE MODEL" if used else "") if e.marked
                    else "signal" if e.signal else f"no signal: {e.why}")
            lines.append(f"        edge {e.edge:<28} changes {100 * e.changed:6.2f} % of outputs, "
                         f"patching score {e.metric_delta:.2e} (outside the circuit at most {e.floor:.2e})  [{mark}]")
        lines.append(f"{'PASSED' if self.passed else 'FAILED'}: {len(self.gates) - len(self.failures())} of "
                     f"{len(self.gates)} gates hold")
        return "\n".join(lines)


# ---------------------------------------------------------------------------- helpers
def _changed(outputs: torch.Tensor, clean: torch.Tensor, task_type: str) -> torch.Tensor:
    """Boolean ``[..., B, P]``: the output differs from the clean one (argmax, or by more than ATOL)."""
    if task_type == "categorical":
        return outputs.argmax(-1) != clean.argmax(-1)
    return (outputs[..., 0] - clean[..., 0]).abs() > ATOL


def _mean(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    w = valid.to(torch.float64)
    return (x.to(torch.float64) * w).sum((-1, -2)) / w.sum().clamp(min=1)


def _agree(out: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, task_type: str) -> float:
    """Share of valid, labelled positions (``target`` over positions 1..) where ``out`` matches."""
    o = out[:, 1:]
    v = valid[:, 1:]
    if task_type == "categorical":
        v = v & (target != NO_CLASS)
        ok = o.argmax(-1) == target
    else:
        ok = (o[..., 0] - target).abs() <= ATOL
    n = int(v.sum())
    return float((ok & v).sum()) / n if n else 1.0


class _HighLevel:
    """The Tracr model of an artifact, read as labels for the low-level model."""

    def __init__(self, tracr_model, task_type: str, none_class: int | None):
        self.model = tracr_model
        self.task_type = task_type
        self.none_class = none_class

    def labels(self, out: torch.Tensor) -> torch.Tensor:
        from cbench.artifacts.transformer_lens_adapter import output_values

        vals = output_values(out, self.task_type)[:, 1:]
        if self.task_type == "categorical":
            return high_level_classes(vals, none_class=self.none_class)
        return vals


# ---------------------------------------------------------------------------- the gates
def node_gates(model, hl: _HighLevel, correspondence: Mapping, circuit_nodes: set[str], data: TaskData,
               kind: str, pairs: str) -> list[Gate]:
    """Accuracy, IIA, SIIA and the largest out-of-circuit node effect, through hooks."""
    from cbench.scoring.ablation import node_effects
    from cbench.tasks.interchange import model_components, run_interchanged, source_activations

    base, source, valid = data.base, data.source, data.valid
    hl_model = hl.model
    entries = {}
    for e in correspondence.get("nodes", []):
        entries.setdefault(e["high_level_node"], sorted({x["node"] for x in e["low_level"]}))
    with torch.no_grad():
        y_b = hl.labels(hl_model(base))
        gates = [_gate("accuracy", pairs, _agree(model(base), y_b, valid, data.task_type))]
        hl_cache = source_activations(hl_model, source, list(entries))
        aligned = {n for ll in entries.values() for n in ll}
        ll_cache = source_activations(model, source, sorted(aligned | set(model_components(model))))
        iia = []
        for hl_node, ll_nodes in entries.items():
            y_iit = hl.labels(run_interchanged(hl_model, base, hl_cache, {hl_node: True}))
            out = run_interchanged(model, base, ll_cache, {n: True for n in ll_nodes})
            iia.append(_agree(out, y_iit, valid, data.task_type))
        gates.append(_gate("iia", pairs, float(np.mean(iia)) if iia else 1.0,
                           detail=f"worst {min(iia):.4f}" if iia else ""))
        if kind == "siit":
            non_aligned = [n for n in model_components(model) if n not in aligned]
            siia = {n: _agree(run_interchanged(model, base, ll_cache, {n: True}), y_b, valid, data.task_type)
                    for n in non_aligned}
            worst = min(siia, key=siia.get) if siia else ""
            gates.append(_gate("siia", pairs, float(np.mean(list(siia.values()))) if siia else 1.0,
                               detail=f"worst {worst} {siia[worst]:.4f}" if siia else ""))
    if kind == "siit":
        labels = torch.zeros(base.shape, dtype=y_b.dtype)
        labels[:, 1:] = y_b.clamp(min=0) if data.task_type == "categorical" else y_b
        lvalid = valid.clone()
        if data.task_type == "categorical":
            lvalid[:, 1:] &= y_b != NO_CLASS
        labelled = TaskData(base, source, labels, lvalid, data.task_type, split=data.split)
        outside = [n for n in model_components(model) if n not in circuit_nodes]
        effects = node_effects(model, labelled, nodes=outside, kinds=("resample",)) if outside else []
        worst = max(effects, key=lambda e: e.effect, default=None)
        gates.append(_gate("max_out_of_circuit_node_effect", pairs, worst.effect if worst else 0.0,
                           detail=worst.node if worst else ""))
    return gates


def edge_gates(model, circuit: Mapping, data: TaskData, pairs: str) -> tuple[list[Gate], dict[str, float]]:
    """The complement gate on ``data``, and the share of outputs each ground-truth edge changes."""
    from cbench.runtime import as_runtime, edge_names_to_mask

    rt = as_runtime(model)
    g = rt.graph
    truth = sorted(circuit["edges"])
    keep = torch.as_tensor(edge_names_to_mask(g, truth), dtype=rt.dtype)
    base = rt.tokens_tensor(data.base)
    with torch.no_grad():
        clean = rt.clean(base)
        abl = rt.ablated_outputs(base, data.source, "resample")
        comp = rt.run(base, edge_mask=keep, ablated=abl).output
        changed = float(_mean(_changed(comp, clean, data.task_type), data.valid))
        gates = [_gate("complement_edge_effect", pairs, changed,
                       detail=f"{int(len(g.edges) - keep.sum())} edges ablated together")]
        masks = torch.ones(len(truth), g.n_edges, dtype=rt.dtype)
        for i, name in enumerate(truth):
            masks[i] = torch.as_tensor(~edge_names_to_mask(g, [name]), dtype=rt.dtype)
        per_edge = {}
        if truth:
            outs = rt.run_masks(base, masks, ablated=abl)
            ch = _mean(_changed(outs, clean, data.task_type), data.valid)
            per_edge = {name: float(ch[i]) for i, name in enumerate(truth)}
    return gates, per_edge


def program_edge_changes(hl: "_HighLevel", correspondence: Mapping, edges: Sequence[str],
                         buckets: Sequence[TaskData]) -> dict[str, float]:
    """For each low-level edge, the largest share of the Tracr model's labelled outputs that
    resample-ablating one high-level edge it stands for (through the correspondence) changes, on
    the pairs of ``buckets``; 0 for an edge that stands for no high-level edge."""
    from cbench.graph.graph import edge_name, parse_edge_name
    from cbench.runtime import as_runtime, edge_names_to_mask

    ll2hl: dict[str, set[str]] = {}
    for entry in correspondence.get("nodes", []):
        for x in entry["low_level"]:
            ll2hl.setdefault(x["node"], set()).add(entry["high_level_node"])
    rt = as_runtime(hl.model)
    out = {}
    for e in edges:
        src, dst, qkv = parse_edge_name(e)
        pre = [edge_name(s, d, qkv) for s in sorted(ll2hl.get(src, {src})) for d in sorted(ll2hl.get(dst, {dst}))]
        pre = [p for p in pre if rt.graph.has_edge(p)]
        worst = 0.0
        for p in pre:
            keep = torch.as_tensor(~edge_names_to_mask(rt.graph, [p]), dtype=rt.dtype)
            changed, n = 0.0, 0
            for data in buckets:
                base = rt.tokens_tensor(data.base)
                with torch.no_grad():
                    clean = hl.labels(rt.clean(base))
                    abl = hl.labels(rt.run(base, edge_mask=keep, source=rt.tokens_tensor(data.source),
                                           ablation="resample").output)
                v = data.valid[:, 1:]
                if hl.task_type == "categorical":
                    v = v & (clean != NO_CLASS)
                    diff = abl != clean
                else:
                    diff = (abl - clean).abs() > ATOL
                changed += float((diff & v).sum())
                n += int(v.sum())
            worst = max(worst, changed / max(n, 1))
        out[e] = worst
    return out


def hand_written_edges_used(silent: set[str], truth: set[str]) -> dict[str, float]:
    """:func:`program_edge_changes` for a hand-written high-level model (IOI), which has no compiled
    program to ablate an edge of, and whose edges join whole nodes, not a head's query, key or value:
    every one of its edges is a step of the model, and the low-level edges that stand for one (the
    destination head's q, k and v) realise it together. A silent q, k or v is then excused only
    while another of the same step carries signal (a head whose attention reads only position,
    which base and source share, moving its content through v); 1.0 for each silent edge whose
    step has no signalling edge left (the model skipped that step), else 0.0."""
    from cbench.graph.graph import parse_edge_name

    def step(e: str) -> tuple[str, str]:
        src, dst, _ = parse_edge_name(e)
        return src, dst

    loud_steps = {step(e) for e in truth - silent}
    return {e: 0.0 if step(e) in loud_steps else 1.0 for e in sorted(silent)}


def _why_no_signal(model, circuit: Mapping, edge: str, data: TaskData) -> str:
    """Why an edge carries no signal under resample ablation: if zero-ablating it changes outputs,
    what it carries is the same on base and source (such as position: they share their length)."""
    from cbench.runtime import as_runtime, edge_names_to_mask

    rt = as_runtime(model)
    base = rt.tokens_tensor(data.base)
    keep = torch.as_tensor(~edge_names_to_mask(rt.graph, [edge]), dtype=rt.dtype)
    with torch.no_grad():
        clean = rt.clean(base)
        zero = rt.run(base, edge_mask=keep, ablation="zero").output
    z = float(_mean(_changed(zero, clean, data.task_type), data.valid))
    if z >= MIN_EDGE_CHANGED:
        src = edge.split("->")[0]
        what = "position" if src == "input" else "a value"
        return (f"carries {what} that base and source share (resample ablation changes no output; "
                f"zero ablation changes {100 * z:.1f} %)")
    return "no output depends on it under resample or zero ablation"


def oracle_scores(model, data: TaskData) -> dict[str, float]:
    """Exact activation patching: every edge's metric increase when it alone is resample-ablated."""
    from cbench.discovery import discover

    res = discover(model, data, "activation-patching", progress=False)
    return {e.name: float(v) for e, v in zip(res.graph.edges, np.asarray(res.scores, dtype=np.float64))}


def oracle_gate(scores: Mapping[str, float], circuit: Mapping, pairs: str, exclude: Sequence[str]) -> Gate:
    """Edge AUROC of the exact patching scores against the ground truth (q/k/v level), without
    the excluded (no-signal) edges."""
    from cbench.scoring.statistics import auroc

    truth, skip = set(circuit["edges"]), set(exclude)
    names = [n for n in scores if n not in skip]
    labels = np.array([n in truth for n in names])
    if labels.all() or not labels.any():
        return _gate("oracle_edge_auroc", pairs, 1.0, detail="every (or no) edge is in the circuit")
    return _gate("oracle_edge_auroc", pairs, float(auroc(np.array([scores[n] for n in names]), labels)),
                 detail=f"{int(labels.sum())} ground-truth edges of {len(names)}")


def _gate(name: str, pairs: str, value: float, detail: str = "") -> Gate:
    op, threshold = GATES[name]
    passed = value >= threshold if op == ">=" else value <= threshold
    return Gate(name, pairs, float(value), op, float(threshold), bool(passed), detail)


def verify_model(model, meta: Mapping, circuit: Mapping, correspondence: Mapping | None, tracr_model,
                 pair_sets: Mapping[str, TaskData | Sequence[TaskData]], oracle_pairs: int = 300) -> VerifyReport:
    """Every gate that applies to the model's kind on every pair set (see the module doc). A pair
    set may be a list of buckets (one per length, for bidirectional models whose inputs cannot be
    padded): each gate is then the buckets' weighted mean."""
    kind = str(meta.get("model_kind"))
    task_type = str(meta["task_type"])
    gates: list[Gate] = []
    per_edge: dict[str, list[float]] = {}
    oracle: dict[str, dict[str, float]] = {}
    hl = _HighLevel(tracr_model, task_type, none_class_of(meta)) if tracr_model is not None else None
    circuit_nodes = {n for n in circuit.get("nodes", []) if n not in ("input", "logits")}
    marks = {e: v for e, v in (circuit.get("edge_signal") or {}).items() if not v.get("signal", True)}
    marked = set(marks)
    truth = set(circuit.get("edges", []))
    for pairs, buckets in pair_sets.items():
        buckets = [buckets] if isinstance(buckets, TaskData) else list(buckets)
        w = np.array([b.n_examples for b in buckets], dtype=np.float64)
        w /= w.sum()
        set_gates: list[list[Gate]] = []
        set_edges: list[dict[str, float]] = []
        set_oracle: list[dict[str, float]] = []
        for data in buckets:  # one bucket per length where inputs of several lengths cannot be padded
            bg: list[Gate] = []
            if kind in ("siit", "iit"):
                if hl is None or correspondence is None:
                    raise UsageError(f"case {meta.get('case')}: a {kind} model needs its tracr/ model and "
                                     "correspondence.json to be verified")
                bg += node_gates(model, hl, correspondence, circuit_nodes, data, kind, pairs)
            if kind in ("siit", "tracr"):
                eg, pe = edge_gates(model, circuit, data, pairs)
                bg += eg
                set_edges.append(pe)
                set_oracle.append(oracle_scores(model, data.subset(max(1, round(oracle_pairs * len(buckets) ** -1)))))
            set_gates.append(bg)
        gates += _combine_gates(set_gates, w)
        if set_edges:
            for e in set_edges[0]:
                per_edge.setdefault(e, []).append(float(sum(wi * pe[e] for wi, pe in zip(w, set_edges))))
            oracle[pairs] = {n: float(sum(wi * sc[n] for wi, sc in zip(w, set_oracle))) for n in set_oracle[0]}
    edges: list[EdgeSignal] = []
    first = next(iter(pair_sets.values()))
    first = first if isinstance(first, TaskData) else first[0]
    floors = {p: max((v for n, v in sc.items() if n not in truth), default=0.0) for p, sc in oracle.items()}
    for e in sorted(per_edge):
        changed = max(per_edge[e])
        best = max(oracle, key=lambda p: oracle[p][e] - floors[p])
        score, floor = oracle[best][e], floors[best]
        if e in marked:  # declared without signal: its why comes from circuit.json
            edges.append(EdgeSignal(e, changed, score, floor, False, marks[e].get("why") or "marked", marked=True))
            continue
        signal = changed >= MIN_EDGE_CHANGED or score > floor
        edges.append(EdgeSignal(e, changed, score, floor, signal,
                                None if signal else _why_no_signal(model, circuit, e, first)))
    if kind == "siit":  # (Tracr releases predate the marks: their report lists such edges, unmarked)
        unmarked = [e.edge for e in edges if not e.signal and not e.marked]
        gates.append(_gate("unmarked_edges_without_signal", "all", float(len(unmarked)),
                           detail=", ".join(unmarked)))
        loud = [e.edge for e in edges if e.marked and e.changed >= MIN_EDGE_CHANGED and e.metric_delta > e.floor]
        gates.append(_gate("marked_edges_with_signal", "all", float(len(loud)), detail=", ".join(loud)))
        silent = (marked | {e.edge for e in edges if not e.signal}) & truth  # marked, or to be marked
        if hl is not None and correspondence is not None and silent:
            if getattr(getattr(hl, "model", None), "cfg", None) is None:
                used = hand_written_edges_used(silent, truth)
            else:
                used = program_edge_changes(hl, correspondence, sorted(silent),
                                            [b for v in pair_sets.values() for b in ([v] if isinstance(v, TaskData) else v)])
            loud = [f"{e} ({100 * c:.1f} %)" for e, c in used.items() if c >= MIN_EDGE_CHANGED]
            gates.append(_gate("marked_edges_the_program_uses", "all", float(len(loud)), detail=", ".join(loud)))
    no_signal = sorted({e.edge for e in edges if not e.signal} | marked)
    for pairs, scores in oracle.items():
        gates.append(oracle_gate(scores, circuit, pairs, no_signal))
    return VerifyReport(str(meta.get("case")), kind, gates, edges,
                        {p: (d.n_examples if isinstance(d, TaskData) else sum(b.n_examples for b in d))
                         for p, d in pair_sets.items()})




def _combine_gates(per_bucket: list[list[Gate]], weights: np.ndarray) -> list[Gate]:
    """One gate per name over a pair set's buckets: values averaged with the buckets' weights (for
    the largest out-of-circuit node effect, the weighted mean of each bucket's largest, which is
    at least the largest weighted mean); the detail of the worst bucket."""
    if len(per_bucket) == 1:
        return per_bucket[0]
    out = []
    for i, g0 in enumerate(per_bucket[0]):
        rows = [b[i] for b in per_bucket]
        value = float(sum(w * g.value for w, g in zip(weights, rows)))
        worst = min(rows, key=lambda g: g.value) if g0.op == ">=" else max(rows, key=lambda g: g.value)
        out.append(_gate(g0.name, g0.pairs, value, detail=worst.detail))
    return out


