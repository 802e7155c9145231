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
* one or more mechanism gates, each showing numerically that the mechanism is there (see
  :data:`MECHANISM_GATES`). Each fails on a model without its mechanism (tests).
"""

from __future__ import annotations

import itertools
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.data import TaskData
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

    def single_kl(self, edges: Sequence[str]) -> np.ndarray:
        """:meth:`kl` of each edge ablated alone (``[[e] for e in edges]``), by the pass of
        :mod:`cbench.verify.edge_patching` (a forward from each edge's destination on, many edges
        stacked in one batch): the same scores to float32 rounding, at a fraction of the cost."""
        from cbench.verify.edge_patching import applies, single_edge_outputs

        g = self.rt.graph
        unknown = [e for e in edges if not g.has_edge(e)]
        if unknown:
            raise UsageError(f"mechanism gate names edges the model does not have: {', '.join(unknown)}")
        if not edges or not applies(self.rt):  # a graph of another shape: the masked pass
            return self.kl([[e] for e in edges]) if edges else np.zeros(0)
        if self._acts is None:
            with torch.no_grad():
                self._acts = self.rt.node_outputs(self.base)
        scores = np.zeros(len(edges))
        for rows, out in single_edge_outputs(self.rt, self._acts, self.ablated, [g.edge_index(e) for e in edges]):
            scores[rows] = self._kl_from_clean(out)
        return scores


# ---------------------------------------------------------------------------- the mechanism gates
def _redundancy(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    groups = dict(spec["groups"])
    need = int(spec.get("need", 2))
    alone = p.changed(list(groups.values()))
    combos = list(itertools.combinations(groups, need))
    together = p.changed([[e for g in c for e in groups[g]] for c in combos])
    worst = max(groups, key=lambda g: alone[list(groups).index(g)])
    return [("redundancy_each_path_alone", float(alone.max()), f"largest: {worst}"),
            ("redundancy_paths_together", float(together.min()),
             f"smallest: {' + '.join(combos[int(together.argmin())])}")]


def _backup(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    primary, backup = list(spec["primary"]), list(spec["backup"])
    ch = p.changed([primary, backup, primary + backup])
    return [("backup_primary_alone", float(ch[0]), ""),
            ("backup_alone", float(ch[1]), ""),
            ("backup_primary_and_backup", float(ch[2]), "")]


def _negative(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    """Zero-ablating the component raises the margin of the model's answer (its logit minus the
    largest other) on at least ``min_fraction`` of valid outputs: it works against the answer."""
    out = p.outputs([list(spec["component"])], ablation="zero")[0]
    ans = p.clean.argmax(-1, keepdim=True)

    def margin(x):
        top = x.gather(-1, ans).squeeze(-1)
        other = x.scatter(-1, ans, float("-inf")).max(-1).values
        return top - other

    raised = (margin(out) > margin(p.clean) + 1e-4) & p.valid
    return [("negative_raises_the_answer_when_removed", float(raised.sum() / p.valid.sum()), "")]


def _cancellation(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    a, b = list(spec["a"]), list(spec["b"])
    ch = p.changed([a, b, a + b])
    return [("cancellation_each_alone", float(min(ch[0], ch[1])), ""),
            ("cancellation_together", float(ch[2]), "")]


def _saturation(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    """Through TransformerLens's own forward (not the runtime): the head's largest attention
    weight per query position."""
    layer, head = _parse_head(spec["head"])
    model = p.rt.model
    with torch.no_grad():
        _, cache = model.run_with_cache(p.base, names_filter=f"blocks.{layer}.attn.hook_pattern")
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"][:, head]  # [B, Q, K]
    top = pattern.max(-1).values  # [B, Q]
    sat = ((top >= float(spec.get("min_attention", 0.99))) & p.valid).sum() / p.valid.sum()
    q = p.changed([list(spec["query_edges"])])
    return [("saturation_share_saturated", float(sat), ""),
            ("saturation_query_patch_changes", float(q[0]), "")]


def _parse_head(name: str) -> tuple[int, int]:
    layer, head = name[1:].split(".h")
    return int(layer), int(head)


def _and(p: _Probe, spec: Mapping, pairs: str) -> list[tuple[str, float, str]]:
    """``inputs`` maps each input's position to the edges that carry it. Ablating an input's
    edges (resample) changes the answer where the AND holds on the base but not with that
    input's token taken from the source, and changes nothing where the AND holds in neither."""
    holds = _condition(spec)
    hb = holds(p.base)
    positions = [int(k) for k in spec["inputs"]]
    out = p.outputs([list(v) for v in spec["inputs"].values()])
    ch = (out.argmax(-1) != p.clean.argmax(-1)) & p.valid  # [n_inputs, B, P]
    on_n = on_c = off_n = off_c = 0
    for i, pos in enumerate(positions):
        mixed = p.base.clone()
        mixed[:, pos] = p.data.source[:, pos]
        hm = holds(mixed)
        on = (hb & ~hm)[:, None] & p.valid
        off = (~hb & ~hm)[:, None] & p.valid
        on_n, on_c = on_n + int(on.sum()), on_c + int((ch[i] & on).sum())
        off_n, off_c = off_n + int(off.sum()), off_c + int((ch[i] & off).sum())
    return [("and_breaks_when_an_input_is_ablated", on_c / on_n if on_n else 0.0,
             f"{int(hb.sum())} base pairs with the AND"),
            ("and_silent_where_it_does_not_hold", off_c / off_n if off_n else 0.0, "")]


def _decoy(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    with torch.no_grad():
        acts = p.rt.node_outputs(p.base)  # [F, B, P, D]
    idx = {n: i for i, n in enumerate(p.rt.graph.forward_nodes)}
    norm = acts.norm(dim=-1)  # [F, B, P]

    def mean_norm(node):
        return float((norm[idx[node]] * p.valid).sum() / p.valid.sum())

    ratio = mean_norm(spec["decoy"]) / max(mean_norm(spec["real"]), 1e-12)
    outs = [e.name for e in p.rt.graph.edges if e.src == spec["decoy"]]
    ch = p.changed([outs])
    return [("decoy_norm_ratio", ratio, f"{spec['decoy']} over {spec['real']}"),
            ("decoy_changes", float(ch[0]), "")]


def _distributed(p: _Probe, spec: Mapping, pairs: str) -> list[Gate]:
    groups = dict(spec["groups"])
    alone = p.changed(list(groups.values()))
    together = p.changed([[e for g in groups.values() for e in g]])
    return [("distributed_each_share_alone", float(alone.max()), ""),
            ("distributed_all_shares_together", float(together[0]), "")]


def _condition(spec: Mapping):
    cond = {int(k): torch.as_tensor(list(v)) for k, v in spec["condition"].items()}

    def holds(tokens):
        ok = torch.ones(tokens.shape[0], dtype=torch.bool)
        for pos, ids in cond.items():
            ok &= torch.isin(tokens[:, pos], ids)
        return ok

    return holds


def _routing(p: _Probe, spec: Mapping, pairs: str) -> list[tuple[str, float, str]]:
    """Ablating the route (resample) changes the answer on the base inputs with the template
    (``condition``: token ids per position) where the source's routed token differs, and changes
    nothing on inputs without the template (neither base nor source has it)."""
    holds = _condition(spec)
    hb, hs = holds(p.base), holds(p.data.source)
    ch = ((p.outputs([list(spec["route"])])[0].argmax(-1) != p.clean.argmax(-1)) & p.valid)  # [B, P]
    on = hb[:, None] & p.valid
    off = (~hb & ~hs)[:, None] & p.valid
    return [("routing_route_needed_on_the_template", float((ch & on).sum() / on.sum()) if on.any() else 0.0,
             f"{int(hb.sum())} base inputs with the template"),
            ("routing_route_silent_off_the_template", float((ch & off).sum() / off.sum()) if off.any() else 0.0, "")]


def _deep(p: _Probe, spec: Mapping, pairs: str) -> list[tuple[str, float, str]]:
    """The circuit's size and depth (edges with signal over the chains, layers its heads span),
    and the smallest share of answers that ablating one whole chain changes."""
    chains = dict(spec["chains"])
    edges = {e for es in chains.values() for e in es}
    layers = {int(n[1:].split(".")[0]) for e in edges for n in e.replace("<", "-").split("->")[:2]
              if n.startswith("a") and ".h" in n}
    each = p.changed(list(chains.values()))
    weakest = list(chains)[int(each.argmin())]
    return [("deep_circuit_edges", float(len(edges)), f"over {len(chains)} chains"),
            ("deep_layers_spanned", float(len(layers)), ""),
            ("deep_each_chain_needed", float(each.min()), f"smallest: {weakest}")]


#: kind -> (gate function, {gate name: (op, threshold key, default)})
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


def thresholds(spec: Mapping) -> dict[str, tuple[str, float]]:
    """The gates a mechanism spec asks for: name -> (op, threshold)."""
    kind = spec.get("kind")
    if kind not in MECHANISM_GATES:
        raise UsageError(f"unknown stress mechanism {kind!r}; known: {', '.join(MECHANISM_GATES)}")
    return {name: (op, float(spec.get(key, default))) for name, (op, key, default) in MECHANISM_GATES[kind][1].items()}


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
    alone = dict(zip(outside + inside, p.single_kl(outside + inside).tolist()))
    floor_scores = np.array([alone[e] for e in outside])
    floor = float(floor_scores.max()) if len(outside) else 0.0
    gates.append(gate("floor", floor, f"largest: {outside[int(floor_scores.argmax())]}" if len(outside) else ""))
    effect: dict[str, float] = {}
    for e in inside:
        rows = [c for c in ctx.get(e, [[]]) if c]
        effect[e] = max([alone[e]] + (p.kl([c + [e] for c in rows], contexts=rows).tolist() if rows else []))
    worst = min(effect, key=effect.get) if effect else ""
    ratio = (effect[worst] / floor) if effect and floor > 0 else float("inf")
    gates.append(gate("circuit_effect_over_floor", ratio,
                      f"smallest: {worst} ({effect.get(worst, 0):.3g} vs floor {floor:.3g})"))
    for spec in (circuit.get("mechanism") or {}).get("gates", []):
        thresholds(spec)  # an unknown kind: one clear error
        gates += [gate(*row) for row in MECHANISM_GATES[spec["kind"]][0](p, spec, pairs)]
    return gates, effect


def gate_table(circuit: Mapping) -> dict[str, tuple[str, float]]:
    """Every stress gate's (op, threshold) for this circuit."""
    table = {"complement_edge_effect": ("<=", MAX_COMPLEMENT), "floor": (">", 0.0),
             "circuit_effect_over_floor": (">", 1.0)}
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


