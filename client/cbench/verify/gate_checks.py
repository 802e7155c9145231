"""The open gate vocabulary of the stress tier: a mechanism gate is a list of **checks**, each built
from a few primitives, carried with its thresholds in the model's ``circuit.json``
(``mechanism.gates``), so ``cbench verify`` runs a new mechanism's gates without code of its own.

A check (a JSON object with ``"kind": "check"``)::

    {"kind": "check", "name": "backup_primary_and_backup",
     "measure": "changed",                       # what is measured (below)
     "sets": [{"label": "P+B", "edges": [...], "nodes": [...], "slice": [...]}],
     "reduce": "max",                            # over the sets: max, min or pool
     "ablation": "resample",                     # or "zero"
     "over": {"measure": ..., "sets": [...]},    # optional: compare with a second measurement
     "compare": "ratio",                         # ... as value / over (or "difference": value - over)
     "op": ">=", "threshold": 0.5}

**Sets.** Each set ablates its ``edges`` together with every edge leaving its ``nodes`` (a node
ablated whole), on the pairs its ``slice`` selects (every pair when it has none).

**Slices** are conditions on tokens, all of which must hold for a pair to be in the slice: each
clause reads the base's tokens (``"tokens": "base"``), the source's (``"source"``) or the base's with
the source's token at the positions ``at`` (``"mixed"``: what a resample ablation of an input's
edges feeds the model), and asks whether, at every position it names, the token is one of the
listed ids (``"where": {"2": [8]}``) -- or, with ``"holds": false``, that this does not hold.

**Measures** (over the valid positions of the pairs in the slice):

* ``changed``: the share of outputs whose answer (argmax) the ablation changes;
* ``kl``: the mean KL(clean || ablated), the exact patching score;
* ``margin_raised``: the share of outputs where the ablation raises the clean answer's margin (its
  logit minus the largest other) by more than 1e-4 (a component working against the answer);
* ``attention_top``: the share of positions where a head's (``"head"``) largest attention weight is
  at least ``min_attention`` (no ablation: the clean run, through TransformerLens's own forward);
* ``output_norm``: the mean norm of a node's (``"node"``) output on the clean run;
* ``edge_count`` and ``layer_count``: the number of distinct edges named by the sets, and of layers
  their heads sit in (structure, no run).

**Reduce** over the sets: ``max`` (the detail names the largest), ``min`` (the smallest) or
``pool`` (the sets' counts summed before dividing: one share over every set's slice; 0 when every
slice is empty). **Compare** two measurements: ``ratio`` (the second floored at 1e-12) or
``difference``. The check passes when ``value op threshold`` (``>=``, ``<=`` or ``>``).

The legacy mechanism kinds (``redundancy``, ``backup``, ...) of the released models are expanded
into checks by :func:`cbench.verify.mechanisms.expand` and run by this same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError

MEASURES = ("changed", "kl", "margin_raised", "attention_top", "output_norm", "edge_count", "layer_count")
REDUCE = ("max", "min", "pool")
OPS = (">=", "<=", ">")
TOKENS = ("base", "source", "mixed")


@dataclass(frozen=True)
class CheckResult:
    name: str
    value: float
    op: str
    threshold: float
    detail: str = ""

    @property
    def passed(self) -> bool:
        return {">=": self.value >= self.threshold, "<=": self.value <= self.threshold,
                ">": self.value > self.threshold}[self.op]


def validate(check: Mapping) -> None:
    """One clear :class:`UsageError` for a check that cannot run."""
    name = check.get("name") or "(unnamed)"
    if not isinstance(check.get("name"), str) or not check["name"]:
        raise UsageError("a gate check needs a 'name'")
    if check.get("measure") not in MEASURES:
        raise UsageError(f"gate check {name}: measure {check.get('measure')!r} is not one of {', '.join(MEASURES)}")
    if check.get("op") not in OPS:
        raise UsageError(f"gate check {name}: op {check.get('op')!r} is not one of {', '.join(OPS)}")
    try:
        float(check["threshold"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"gate check {name}: a numeric 'threshold' is needed") from None
    if check.get("reduce", "max") not in REDUCE:
        raise UsageError(f"gate check {name}: reduce {check.get('reduce')!r} is not one of {', '.join(REDUCE)}")
    if check.get("ablation", "resample") not in ("resample", "zero"):
        raise UsageError(f"gate check {name}: ablation must be 'resample' or 'zero'")
    sets = check.get("sets", [])
    if not isinstance(sets, list) or (check["measure"] in ("changed", "kl", "margin_raised") and not sets):
        raise UsageError(f"gate check {name}: 'sets' must be a non-empty list of edge sets")
    for s in sets:
        for clause in (s.get("slice") or []) if isinstance(s, Mapping) else []:
            if clause.get("tokens", "base") not in TOKENS:
                raise UsageError(f"gate check {name}: a slice reads tokens 'base', 'source' or 'mixed'")
    if "over" in check:
        if check.get("compare", "ratio") not in ("ratio", "difference"):
            raise UsageError(f"gate check {name}: compare must be 'ratio' or 'difference'")
        validate({"name": name, "op": check["op"], "threshold": check["threshold"], **check["over"]})


# ---------------------------------------------------------------------------- slices
def _holds(tokens: torch.Tensor, where: Mapping) -> torch.Tensor:
    ok = torch.ones(tokens.shape[0], dtype=torch.bool)
    for pos, ids in where.items():
        ok &= torch.isin(tokens[:, int(pos)], torch.as_tensor([int(i) for i in ids]))
    return ok


def slice_mask(p, clauses: Sequence[Mapping] | None) -> torch.Tensor:
    """``[B]``: the pairs every clause selects (all pairs when there is none)."""
    base, source = p.base, p.data.source
    mask = torch.ones(base.shape[0], dtype=torch.bool)
    for c in clauses or []:
        which = c.get("tokens", "base")
        if which == "base":
            tokens = base
        elif which == "source":
            tokens = source
        else:
            tokens = base.clone()
            for pos in c.get("at", []):
                tokens[:, int(pos)] = source[:, int(pos)]
        h = _holds(tokens, c.get("where", {}))
        mask &= h if c.get("holds", True) else ~h
    return mask


# ---------------------------------------------------------------------------- measures
def _set_edges(p, s: Mapping) -> list[str]:
    edges = list(s.get("edges", []))
    nodes = set(s.get("nodes", []))
    if nodes:
        known = {e.src for e in p.rt.graph.edges}
        unknown = sorted(nodes - known)
        if unknown:
            raise UsageError(f"mechanism gate names nodes the model does not have: {', '.join(unknown)}")
        edges += [e.name for e in p.rt.graph.edges if e.src in nodes and e.name not in edges]
    return edges


def _counts(p, check: Mapping, sets: Sequence[Mapping]) -> tuple[np.ndarray, np.ndarray]:
    """Per set: (the measure summed over the valid outputs of its slice, how many there are)."""
    measure = check["measure"]
    ablation = check.get("ablation", "resample")
    num, den = np.zeros(len(sets)), np.zeros(len(sets))
    if measure in ("changed", "kl", "margin_raised"):
        out = p.outputs([_set_edges(p, s) for s in sets], ablation=ablation)
        for i, s in enumerate(sets):
            sel = slice_mask(p, s.get("slice"))[:, None] & p.valid  # [B, P]
            if measure == "changed":
                hit = out[i].argmax(-1) != p.clean.argmax(-1)
                num[i] = float((hit & sel).sum())
            elif measure == "kl":
                lq = torch.log_softmax(out[i], -1)
                kl = (p._logp.exp() * (p._logp - lq)).sum(-1)
                num[i] = float((kl.double() * sel).sum())
            else:
                ans = p.clean.argmax(-1, keepdim=True)

                def margin(x):
                    top = x.gather(-1, ans).squeeze(-1)
                    return top - x.scatter(-1, ans, float("-inf")).max(-1).values

                num[i] = float(((margin(out[i]) > margin(p.clean) + 1e-4) & sel).sum())
            den[i] = float(sel.sum())
        return num, den
    if measure == "attention_top":
        for i, s in enumerate(sets or [{}]):
            layer, head = parse_head(s.get("head", check.get("head", "")))
            with torch.no_grad():
                _, cache = p.rt.model.run_with_cache(p.base, names_filter=f"blocks.{layer}.attn.hook_pattern")
            top = cache[f"blocks.{layer}.attn.hook_pattern"][:, head].max(-1).values  # [B, Q]
            sel = slice_mask(p, s.get("slice"))[:, None] & p.valid
            num[i] = float(((top >= float(check.get("min_attention", 0.99))) & sel).sum())
            den[i] = float(sel.sum())
        return num, den
    if measure == "output_norm":
        acts = p.node_outputs()
        idx = {n: j for j, n in enumerate(p.rt.graph.forward_nodes)}
        norm = acts.norm(dim=-1)  # [F, B, P]
        for i, s in enumerate(sets or [{}]):
            node = s.get("node", check.get("node"))
            if node not in idx:
                raise UsageError(f"mechanism gate names a node the model does not have: {node}")
            sel = slice_mask(p, s.get("slice"))[:, None] & p.valid
            num[i] = float((norm[idx[node]] * sel).sum())
            den[i] = float(sel.sum())
        return num, den
    raise AssertionError(measure)


def measure(p, check: Mapping) -> tuple[float, str]:
    """The check's value (before any comparison) and a detail naming the set that decided it."""
    sets = list(check.get("sets", []))
    kind = check["measure"]
    if kind in ("edge_count", "layer_count"):
        edges = {e for s in sets for e in s.get("edges", [])}
        if kind == "edge_count":
            return float(len(edges)), f"over {len(sets)} sets"
        layers = {int(n[1:].split(".")[0]) for e in edges for n in e.replace("<", "-").split("->")[:2]
                  if n.startswith("a") and ".h" in n}
        return float(len(layers)), ""
    num, den = _counts(p, check, sets)
    labels = [s.get("label", str(i)) for i, s in enumerate(sets or [{}])]
    reduce = check.get("reduce", "max")
    if reduce == "pool":
        return (float(num.sum() / den.sum()) if den.sum() else 0.0), f"{int(den.sum())} outputs in the slices"
    shares = np.where(den > 0, num / np.maximum(den, 1), 0.0)
    i = int(shares.argmax() if reduce == "max" else shares.argmin())
    detail = f"{'largest' if reduce == 'max' else 'smallest'}: {labels[i]}" if len(shares) > 1 else ""
    return float(shares[i]), detail


def run_check(p, check: Mapping) -> CheckResult:
    validate(check)
    value, detail = measure(p, check)
    if "over" in check:
        other, _ = measure(p, {"name": check["name"], **check["over"]})
        if check.get("compare", "ratio") == "ratio":
            value = value / max(other, 1e-12)
        else:
            value = value - other
    return CheckResult(check["name"], float(value), check["op"], float(check["threshold"]),
                       check.get("detail", detail))


def parse_head(name: str) -> tuple[int, int]:
    try:
        layer, head = name[1:].split(".h")
        return int(layer), int(head)
    except (ValueError, IndexError):
        raise UsageError(f"mechanism gate: {name!r} is not a head name like a1.h0") from None
