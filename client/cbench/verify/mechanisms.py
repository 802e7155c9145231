"""Gates of the stress tier: a stress model's ground truth is proved by these, never by a
discovery method.

A stress model (``model_kind: "stress"``) plants one mechanism that makes circuit discovery hard
(redundancy, backup, negative components, cancellation, attention saturation, a steep AND, decoys,
distributed variables). Its ``circuit.json`` gives every ground-truth edge a class
(``edge_classes``) and the mechanism's gates (``mechanism.gates``); :func:`stress_gates` checks, on
each pair set (resample ablation; outputs compared with the model's own clean outputs):

* ``complement_edge_effect``: ablating every edge outside the circuit at once changes at most
  1 % of outputs;
* ``floor``: the largest exact patching score (the KL the ablation adds) of an edge outside the
  circuit; it must be above 0 (the model has a realistic floor of small true effects);
* ``circuit_effect_over_floor``: the smallest exact patching score of a circuit edge *in the
  ablation context where it is necessary* (the KL between the model with the context ablated and
  with the context and the edge ablated; contexts: for a redundant path, another path ablated;
  for a primary, its backup ablated, and the reverse; for an edge feeding both branches of a
  cancellation, one branch ablated) divided by the floor, at least 1: every labelled edge is used,
  and every edge outside the circuit does less than any edge inside;
* one or more mechanism gates, each showing numerically that the mechanism is there. Each fails on
  a model without its mechanism (tests).

**Gate spec format** (``circuit.json`` ``mechanism``; issue 45, item 5). ``mechanism.gates`` is a
list of specs. A spec with ``"kind": "check"`` is one check of the open vocabulary
(:mod:`cbench.verify.gate_checks`: ablate sets of edges or nodes on a slice of inputs defined by
token conditions, measure changed answers, KL, margins, attention or norms, reduce over the sets by
max / min / pool, optionally compare with a second measurement, and hold the value to ``op
threshold``): each design carries its own checks and thresholds, so a new mechanism needs no code
here. The ten legacy kinds (``redundancy``, ``backup``, ``negative``, ``cancellation``,
``saturation``, ``and``, ``decoy``, ``distributed``, ``routing``, ``deep``) of the released models
are expanded into such checks (:func:`expand`, :data:`MECHANISM_GATES`) and give the figures the
per-mechanism code gave (``tests/test_gate_checks.py`` checks all 20 released models). Optional
``mechanism.contexts`` (``{edge: [[edges ablated first], ...]}``) names the ablation contexts in which
an edge is necessary, for designs whose gates are plain checks; the legacy kinds derive theirs
(:func:`contexts`). Optional ``floor`` (``{"min_share": x}``) adds the dense-floor gate
``floor_share_above_resolution``: the share of edges outside the circuit whose exact patching score
is at or above the numerical resolution of the patching scores (``cbench.scoring.resolution``).
That cutoff is relative to the largest score, circuit edges included, and KL is quadratic in a
small change of the logits, so it misses floor edges with a real effect (a 1e-4 logit change is a
KL of 1e-8); it is kept as it was (the released meta.json figures) and every stress model also gets
``floor_share_moving_logits`` (:mod:`cbench.verify.floor_share`): the share of outside edges whose
ablation alone moves some logit by at least 64 eps(float32) x max |clean logit|, by edge kind, with
the reason for each edge that does not (source unchanged, attention fixed, destination ignores the
change, downstream below resolution). Its threshold is the floor's ``min_share`` on a dense floor,
``> 0`` on a sparse one.
"""

from __future__ import annotations

import itertools
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.data import TaskData
from cbench.verify.floor_share import floor_share
from cbench.verify.gate_checks import run_check, validate
from cbench.verify.gates import EdgeSignal, Gate, VerifyReport

MAX_COMPLEMENT = 0.01


class _Probe:
    """Outputs of one model under sets of resample-ablated edges, on one pair set."""

    def __init__(self, model, data: TaskData):
        from cbench.runtime import as_runtime

        self.rt = as_runtime(model)
        self.data = data
        self.base = self.rt.tokens_tensor(data.base)
        with torch.no_grad():
            self.clean = self.rt.clean(self.base)
            self.ablated = self.rt.ablated_outputs(self.base, data.source, "resample")
        self.valid = data.valid
        self._logp = torch.log_softmax(self.clean, -1)
        self._acts = None  # the clean node outputs, for single_kl

    def masks(self, groups: Sequence[Sequence[str]]) -> torch.Tensor:
        from cbench.runtime import edge_names_to_mask

        m = torch.ones(len(groups), self.rt.n_edges, dtype=self.rt.dtype)
        for i, g in enumerate(groups):
            unknown = [e for e in g if not self.rt.graph.has_edge(e)]
            if unknown:
                raise UsageError(f"mechanism gate names edges the model does not have: {', '.join(unknown)}")
            m[i] = torch.as_tensor(~edge_names_to_mask(self.rt.graph, g), dtype=self.rt.dtype)
        return m

    @torch.no_grad()
    def outputs(self, groups: Sequence[Sequence[str]], ablation: str = "resample") -> torch.Tensor:
        if not groups:
            return torch.zeros(0, *self.clean.shape)
        if ablation == "resample":
            return self.rt.run_masks(self.base, self.masks(groups), ablated=self.ablated)
        return self.rt.run_masks(self.base, self.masks(groups), source=self.data.source, ablation=ablation)

    def changed(self, groups: Sequence[Sequence[str]]) -> np.ndarray:
        """Share of valid outputs whose answer changes, per group of edges ablated together."""
        out = self.outputs(groups)
        ch = (out.argmax(-1) != self.clean.argmax(-1)) & self.valid
        return (ch.flatten(1).sum(1).double() / self.valid.sum()).numpy()

    def kl(self, groups: Sequence[Sequence[str]], contexts: Sequence[Sequence[str]] | None = None) -> np.ndarray:
        """Exact patching score per group: mean KL(reference || ablated) over valid positions,
        where the reference is the clean model or, with ``contexts``, the model with that
        context's edges ablated (the group's effect *given* the context)."""
        out = self.outputs(groups)
        if contexts is None:
            return self._kl_from_clean(out)
        lq = torch.log_softmax(out, -1)
        lp = torch.stack([self._logp if not c else torch.log_softmax(self.outputs([c])[0], -1) for c in contexts])
        return self._mean_kl(lp, lq)

    def _kl_from_clean(self, out: torch.Tensor) -> np.ndarray:
        lq = torch.log_softmax(out, -1)
        return self._mean_kl(self._logp.expand_as(lq), lq)

    def _mean_kl(self, lp: torch.Tensor, lq: torch.Tensor) -> np.ndarray:
        kl = (lp.exp() * (lp - lq)).sum(-1)
        return ((kl * self.valid).flatten(1).sum(1).double() / self.valid.sum()).numpy()

    def node_outputs(self) -> torch.Tensor:
        """The clean node outputs ``[F, B, P, D]`` (computed once)."""
        if self._acts is None:
            with torch.no_grad():
                self._acts = self.rt.node_outputs(self.base)
        return self._acts

    def single_kl(self, edges: Sequence[str]) -> np.ndarray:
        """:meth:`kl` of each edge ablated alone (``[[e] for e in edges]``), by the pass of
        :mod:`cbench.verify.edge_patching` (a forward from each edge's destination on, many edges
        stacked in one batch): the same scores to float32 rounding, at a fraction of the cost."""
        return self.single_effects(edges)[0]

    def single_effects(self, edges: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per edge ablated alone, from one pass: :meth:`single_kl`'s score, the largest logit change
        over valid positions and the largest change of the destination's own output
        (:mod:`cbench.verify.floor_share`; a graph of another shape takes the masked pass, which
        does not give the last: +inf)."""
        from cbench.verify.edge_patching import applies, single_edge_effects
        from cbench.verify.floor_share import logit_change

        g = self.rt.graph
        unknown = [e for e in edges if not g.has_edge(e)]
        if unknown:
            raise UsageError(f"mechanism gate names edges the model does not have: {', '.join(unknown)}")
        n = len(edges)
        scores, logit, dest = np.zeros(n), np.zeros(n), np.zeros(n)
        if not edges:
            return scores, logit, dest
        if not applies(self.rt):  # a graph of another shape: the masked pass
            out = self.outputs([[e] for e in edges])
            return self._kl_from_clean(out), logit_change(out, self.clean, self.valid), np.full(n, np.inf)
        for rows, out, moved in single_edge_effects(self.rt, self.node_outputs(), self.ablated,
                                                    [g.edge_index(e) for e in edges]):
            scores[rows] = self._kl_from_clean(out)
            logit[rows] = logit_change(out, self.clean, self.valid)
            dest[rows] = moved.double().numpy()
        return scores, logit, dest


# ---------------------------------------------------------------------------- the mechanism gates
# The released models' mechanism kinds, each expanded into checks of the open vocabulary
# (cbench.verify.gate_checks): the same figures as the per-mechanism code they replace.
def _sets(groups: Mapping[str, Sequence[str]]) -> list[dict]:
    return [{"label": g, "edges": list(es)} for g, es in groups.items()]


def _where(spec: Mapping) -> dict:
    return {str(k): [int(i) for i in v] for k, v in spec["condition"].items()}


def _redundancy(spec: Mapping, t) -> list[dict]:
    groups = dict(spec["groups"])
    need = int(spec.get("need", 2))
    combos = list(itertools.combinations(groups, need))
    return [check("redundancy_each_path_alone", "changed", _sets(groups), *t("redundancy_each_path_alone"), "max"),
            check("redundancy_paths_together", "changed",
                  [{"label": " + ".join(c), "edges": [e for g in c for e in groups[g]]} for c in combos],
                  *t("redundancy_paths_together"), "min")]


def _backup(spec: Mapping, t) -> list[dict]:
    primary, backup = list(spec["primary"]), list(spec["backup"])
    return [check("backup_primary_alone", "changed", [{"edges": primary}], *t("backup_primary_alone")),
            check("backup_alone", "changed", [{"edges": backup}], *t("backup_alone")),
            check("backup_primary_and_backup", "changed", [{"edges": primary + backup}],
                  *t("backup_primary_and_backup"))]


def _negative(spec: Mapping, t) -> list[dict]:
    """Zero-ablating the component raises the margin of the model's answer on at least
    ``min_fraction`` of valid outputs: it works against the answer."""
    return [check("negative_raises_the_answer_when_removed", "margin_raised", [{"edges": list(spec["component"])}],
                  *t("negative_raises_the_answer_when_removed"), ablation="zero")]


def _cancellation(spec: Mapping, t) -> list[dict]:
    a, b = list(spec["a"]), list(spec["b"])
    return [check("cancellation_each_alone", "changed", [{"label": "a", "edges": a}, {"label": "b", "edges": b}],
                  *t("cancellation_each_alone"), "min", detail=""),
            check("cancellation_together", "changed", [{"edges": a + b}], *t("cancellation_together"))]


def _saturation(spec: Mapping, t) -> list[dict]:
    return [check("saturation_share_saturated", "attention_top", [{"head": spec["head"]}],
                  *t("saturation_share_saturated"), min_attention=float(spec.get("min_attention", 0.99))),
            check("saturation_query_patch_changes", "changed", [{"edges": list(spec["query_edges"])}],
                  *t("saturation_query_patch_changes"))]


def _and(spec: Mapping, t) -> list[dict]:
    """Ablating an input's edges (resample) changes the answer where the AND holds on the base but
    not with that input's token taken from the source, and changes nothing where it holds in neither."""
    where = _where(spec)

    def sets(on: bool) -> list[dict]:
        out = []
        for pos, edges in spec["inputs"].items():
            mixed = {"tokens": "mixed", "at": [int(pos)], "where": where, "holds": False}
            out.append({"label": f"input {pos}", "edges": list(edges),
                        "slice": [{"tokens": "base", "where": where, "holds": on}, mixed]})
        return out

    return [check("and_breaks_when_an_input_is_ablated", "changed", sets(True),
                  *t("and_breaks_when_an_input_is_ablated"), "pool"),
            check("and_silent_where_it_does_not_hold", "changed", sets(False),
                  *t("and_silent_where_it_does_not_hold"), "pool")]


def _decoy(spec: Mapping, t) -> list[dict]:
    return [check("decoy_norm_ratio", "output_norm", [{"node": spec["decoy"]}], *t("decoy_norm_ratio"),
                  over={"measure": "output_norm", "sets": [{"node": spec["real"]}]}, compare="ratio",
                  detail=f"{spec['decoy']} over {spec['real']}"),
            check("decoy_changes", "changed", [{"nodes": [spec["decoy"]]}], *t("decoy_changes"))]


def _distributed(spec: Mapping, t) -> list[dict]:
    groups = dict(spec["groups"])
    return [check("distributed_each_share_alone", "changed", _sets(groups), *t("distributed_each_share_alone"),
                  "max", detail=""),
            check("distributed_all_shares_together", "changed", [{"edges": [e for g in groups.values() for e in g]}],
                  *t("distributed_all_shares_together"))]


def _routing(spec: Mapping, t) -> list[dict]:
    """Ablating the route (resample) changes the answer on the base inputs with the template
    (``condition``: token ids per position) and nothing on inputs without it (in base and source)."""
    where = _where(spec)
    route = list(spec["route"])
    return [check("routing_route_needed_on_the_template", "changed",
                  [{"edges": route, "slice": [{"tokens": "base", "where": where}]}],
                  *t("routing_route_needed_on_the_template")),
            check("routing_route_silent_off_the_template", "changed",
                  [{"edges": route, "slice": [{"tokens": "base", "where": where, "holds": False},
                                              {"tokens": "source", "where": where, "holds": False}]}],
                  *t("routing_route_silent_off_the_template"))]


def _deep(spec: Mapping, t) -> list[dict]:
    """The circuit's size and depth (edges with signal over the chains, layers its heads span),
    and the smallest share of answers that ablating one whole chain changes."""
    chains = _sets(dict(spec["chains"]))
    return [check("deep_circuit_edges", "edge_count", chains, *t("deep_circuit_edges")),
            check("deep_layers_spanned", "layer_count", chains, *t("deep_layers_spanned")),
            check("deep_each_chain_needed", "changed", chains, *t("deep_each_chain_needed"), "min")]


def check(name: str, measure: str, sets: list[dict], op: str, threshold: float, reduce: str = "max", **extra) -> dict:
    """One check of the open vocabulary (:mod:`cbench.verify.gate_checks`) as a JSON object."""
    return {"kind": "check", "name": name, "measure": measure, "sets": sets, "reduce": reduce, "op": op,
            "threshold": float(threshold), **extra}


#: kind -> (expansion into checks, {gate name: (op, threshold key, default)})
MECHANISM_GATES: dict[str, tuple[Callable, dict[str, tuple[str, str, float]]]] = {
    "redundancy": (_redundancy, {"redundancy_each_path_alone": ("<=", "alone_max", 0.05),
                                 "redundancy_paths_together": (">=", "together_min", 0.5)}),
    "backup": (_backup, {"backup_primary_alone": ("<=", "alone_max", 0.01), "backup_alone": ("<=", "alone_max", 0.01),
                         "backup_primary_and_backup": (">=", "together_min", 0.5)}),
    "negative": (_negative, {"negative_raises_the_answer_when_removed": (">=", "min_fraction", 0.95)}),
    "cancellation": (_cancellation, {"cancellation_each_alone": (">=", "each_min", 0.3),
                                     "cancellation_together": ("<=", "together_max", 0.01)}),
    "saturation": (_saturation, {"saturation_share_saturated": (">=", "min_fraction", 0.95),
                                 "saturation_query_patch_changes": (">=", "query_min", 0.3)}),
    "and": (_and, {"and_breaks_when_an_input_is_ablated": (">=", "on_min", 0.5),
                   "and_silent_where_it_does_not_hold": ("<=", "off_max", 0.01)}),
    "decoy": (_decoy, {"decoy_norm_ratio": (">=", "min_norm_ratio", 10.0), "decoy_changes": ("<=", "max_changed", 0.0)}),
    "routing": (_routing, {"routing_route_needed_on_the_template": (">=", "on_min", 0.5),
                           "routing_route_silent_off_the_template": ("<=", "off_max", 0.01)}),
    "deep": (_deep, {"deep_circuit_edges": (">=", "min_edges", 50.0), "deep_layers_spanned": (">=", "min_layers", 4.0),
                     "deep_each_chain_needed": (">=", "chain_min", 0.05)}),
    "distributed": (_distributed, {"distributed_each_share_alone": ("<=", "alone_max", 0.05),
                                   "distributed_all_shares_together": (">=", "all_min", 0.5)}),
}


def expand(spec: Mapping) -> list[dict]:
    """A gate spec as checks: a ``check`` as it is, a legacy mechanism kind through its expansion
    (thresholds from the spec's keys, defaults as before)."""
    kind = spec.get("kind")
    if kind == "check":
        validate(spec)
        return [dict(spec)]
    if kind not in MECHANISM_GATES:
        raise UsageError(f"unknown stress mechanism {kind!r}; known: check, {', '.join(MECHANISM_GATES)}")
    fn, table = MECHANISM_GATES[kind]

    def t(name: str) -> tuple[str, float]:
        op, key, default = table[name]
        return op, float(spec.get(key, default))

    return fn(spec, t)


def thresholds(spec: Mapping) -> dict[str, tuple[str, float]]:
    """The gates a spec asks for: name -> (op, threshold)."""
    return {c["name"]: (c["op"], float(c["threshold"])) for c in expand(spec)}


def contexts(circuit: Mapping) -> dict[str, list[list[str]]]:
    """For each circuit edge, the ablation contexts in which it is necessary: the empty one, and
    those the mechanism implies (other redundant paths ablated until the path is needed; the
    backup ablated for a primary edge and the primary for a backup edge; one branch of a
    cancellation ablated for an edge that feeds both). A share of a distributed variable has no
    context: it must stand above the floor alone."""
    edges = list(circuit["edges"])
    out = {e: [[]] for e in edges}
    for spec in (circuit.get("mechanism") or {}).get("gates", []):
        kind = spec.get("kind")
        if kind == "redundancy":  # (a distributed share must show alone: no context for it)
            groups = dict(spec["groups"])
            members = {e: g for g, es in groups.items() for e in es}
            need = int(spec.get("need", 2))
            for e in edges:
                # a path's other edges count as the path (an input edge is necessary when the path's
                # other paths are ablated)
                g_of = members.get(e) or next((g for g in groups if g in e), None)
                if g_of is None:
                    continue
                others = [g for g in groups if g != g_of]
                k = len(others) - (need - 1)
                for combo in itertools.combinations(others, max(k, 0)):
                    out[e].append([x for g in combo for x in groups[g]])
        elif kind == "cancellation":  # an edge upstream of both branches shows when one is ablated
            classes = circuit.get("edge_classes") or {}
            for e in edges:
                if classes.get(e) == "cancelling":
                    out[e] += [list(spec["a"]), list(spec["b"])]
        elif kind == "backup":
            classes = circuit.get("edge_classes") or {}
            for e in edges:
                if classes.get(e) == "primary":
                    out[e].append(list(spec["backup"]))
                elif classes.get(e) == "backup":
                    out[e].append(list(spec["primary"]))
    for e, cs in ((circuit.get("mechanism") or {}).get("contexts") or {}).items():
        if e in out:
            out[e] += [list(c) for c in cs if list(c) not in out[e]]
    return out


def stress_gates(model, circuit: Mapping, data: TaskData, pairs: str) -> tuple[list[Gate], dict[str, float]]:
    """Every stress gate on one pair set, and each circuit edge's exact patching score in its
    necessity context (for the report)."""
    table = gate_table(circuit)

    def gate(name: str, value: float, detail: str = "") -> Gate:
        op, threshold = table[name]
        passed = {">=": value >= threshold, "<=": value <= threshold, ">": value > threshold}[op]
        return Gate(name, pairs, float(value), op, float(threshold), bool(passed), detail)

    p = _Probe(model, data)
    g = p.rt.graph
    truth = set(circuit["edges"])
    marked = {e for e, v in (circuit.get("edge_signal") or {}).items() if not v.get("signal", True)}
    outside = [e.name for e in g.edges if e.name not in truth]
    gates = [gate("complement_edge_effect", float(p.changed([outside])[0]), f"{len(outside)} edges ablated together")]
    ctx = contexts(circuit)
    inside = sorted(truth - marked)
    # every edge alone (the empty context), outside and inside the circuit, in one fast pass
    kl_alone, logit_alone, dest_alone = p.single_effects(outside + inside)
    alone = dict(zip(outside + inside, kl_alone.tolist()))
    floor_scores = np.array([alone[e] for e in outside])
    floor = float(floor_scores.max()) if len(outside) else 0.0
    gates.append(gate("floor", floor, f"largest: {outside[int(floor_scores.argmax())]}" if len(outside) else ""))
    if circuit.get("floor"):  # a dense floor: every edge outside the circuit carries a resolvable effect
        from cbench.scoring.resolution import resolution_of

        res = resolution_of(list(alone.values()), "float32")
        above = floor_scores >= res if res > 0 else floor_scores > 0
        share = float(above.mean()) if len(outside) else 1.0
        below = [e for e, a in zip(outside, above) if not a]
        gates.append(gate("floor_share_above_resolution", share,
                          f"{int(above.sum())} of {len(outside)} outside edges at or above {res:.3g}"
                          + (f"; smallest: {outside[int(floor_scores.argmin())]} ({floor_scores.min():.3g})"
                             if below else "")))
    if outside:  # every model: how many outside edges move the logits, and why the others do not
        n = len(outside)
        fs = floor_share(p.rt, p.node_outputs(), p.ablated, p.clean, p.valid, outside,
                         measured=(logit_alone[:n], dest_alone[:n]))
        gates.append(gate("floor_share_moving_logits", fs.share, fs.detail()))
    effect: dict[str, float] = {}
    for e in inside:
        rows = [c for c in ctx.get(e, [[]]) if c]
        effect[e] = max([alone[e]] + (p.kl([c + [e] for c in rows], contexts=rows).tolist() if rows else []))
    worst = min(effect, key=effect.get) if effect else ""
    ratio = (effect[worst] / floor) if effect and floor > 0 else float("inf")
    gates.append(gate("circuit_effect_over_floor", ratio,
                      f"smallest: {worst} ({effect.get(worst, 0):.3g} vs floor {floor:.3g})"))
    for spec in (circuit.get("mechanism") or {}).get("gates", []):
        for c in expand(spec):
            r = run_check(p, c)
            gates.append(Gate(r.name, pairs, r.value, r.op, r.threshold, r.passed, r.detail))
    return gates, effect


def gate_table(circuit: Mapping) -> dict[str, tuple[str, float]]:
    """Every stress gate's (op, threshold) for this circuit."""
    table = {"complement_edge_effect": ("<=", MAX_COMPLEMENT), "floor": (">", 0.0),
             "circuit_effect_over_floor": (">", 1.0)}
    if circuit.get("floor"):
        table["floor_share_above_resolution"] = (">=", float(circuit["floor"].get("min_share", 1.0)))
        table["floor_share_moving_logits"] = (">=", float(circuit["floor"].get("min_share", 1.0)))
    else:  # a sparse floor: some outside edge moves the logits (as ``floor`` > 0 says of the KL)
        table["floor_share_moving_logits"] = (">", 0.0)
    for spec in (circuit.get("mechanism") or {}).get("gates", []):
        table.update(thresholds(spec))
    return table


def _labels_gate(model, data: TaskData, pairs: str) -> Gate:
    """The share of labelled positions where the model answers the dataset's label (all of them:
    the labels of ``cbench/stress-counterfactuals`` are the model's answers)."""
    with torch.no_grad():
        answers = model(data.base).argmax(-1)
    mask = data.valid & (data.labels >= 0)
    share = float((answers[mask] == data.labels[mask]).float().mean()) if mask.any() else 0.0
    return Gate("labels", pairs, share, ">=", 1.0, share >= 1.0,
                "the dataset's labels are the model's answers at every labelled position")


def verify_stress(model, meta: Mapping, circuit: Mapping, pair_sets: Mapping[str, TaskData]) -> VerifyReport:
    """The stress tier's gates (:mod:`cbench.verify.mechanisms`) on every pair set; each circuit
    edge's exact patching score in its necessity context against the floor in the report."""
    gates: list[Gate] = []
    effects: dict[str, list[float]] = {}
    floors = []
    for pairs, data in pair_sets.items():
        g, eff = stress_gates(model, circuit, data, pairs)
        gates += g
        if data.labels is not None:  # a released dataset's labels are the model's own answers
            gates.append(_labels_gate(model, data, pairs))
        floors.append(next(x.value for x in g if x.name == "floor"))
        for e, v in eff.items():
            effects.setdefault(e, []).append(v)
    marks = {e: v for e, v in (circuit.get("edge_signal") or {}).items() if not v.get("signal", True)}
    edges = [EdgeSignal(e, float("nan"), min(v), max(floors), min(v) > max(floors)) for e, v in sorted(effects.items())]
    edges += [EdgeSignal(e, float("nan"), 0.0, max(floors), False, m.get("why") or "marked", marked=True)
              for e, m in sorted(marks.items())]
    return VerifyReport(str(meta.get("case")), "stress", gates, edges,
                        {p: d.n_examples for p, d in pair_sets.items()})


