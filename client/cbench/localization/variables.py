"""Causal variables of a cbench model, the locations that may hold them, and their data.

A **variable** is a RASP operation of the case's program that a model component computes
(``circuit.json``'s ``high_level.ops``: Maps, SequenceMaps, Aggregates, SelectorWidths, ...).
Inputs (tokens, indices) are not variables, and neither are Selects: a Select is an attention
pattern, not a vector any component writes, so no featurizer of a hidden vector can hold it.

A **location** is a hidden vector, at every position (the counterfactual labels interchange a
variable at every position at once). Names:

* ``a{L}.h{H}`` -- head H of layer L (``hook_z``, ``d_head`` wide);
* ``m{L}`` -- the output of MLP L;
* ``resid.{L}`` -- the residual stream entering layer L (``resid.{n_layers}``: leaving the last);
* ``X+Y`` -- several nodes intervened together (SIIT maps some variables to two nodes);
* ``node[d1,d2,...]`` -- the node's output in residual coordinates (``hook_result`` for a head)
  restricted to those dimensions: where Tracr put the variable.

The **aligned location** is the ground truth: for an SIIT model the low-level nodes
``correspondence.json`` lists for the variable (joined by ``+``); for a compiled Tracr model the
op's component restricted to the op's ``residual_dims`` (the known subspace). The variable's
**nodes** are the nodes that compute it: the aligned ones, and for Tracr every component of the
op (a SelectorWidth is computed by a head and the MLP after it).

The **data** of a variable are the counterfactual pairs with, as labels, the high-level model's
output when the variable alone is interchanged from the source (the dataset's
``interchange_labels``); positions where that label is ``None`` are left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from cbench.errors import UsageError, did_you_mean
from cbench.graph.graph import _HEAD_RE, _MLP_RE
from cbench.localization.rows import read_rows  # noqa: F401 - its home before cbench.localization.rows
from cbench.tasks.data import TaskData, from_rows

NOT_VARIABLES = ("IndicesType", "TokensType", "Select")
_RESID_RE = re.compile(r"^resid\.(\d+)$")
_SLICE_RE = re.compile(r"^(a\d+\.h\d+|m\d+)\[(\d+(?:,\d+)*)\]$")


@dataclass(frozen=True)
class Part:
    """One hidden vector of a location: a pyvene site and the coordinates (frame) it uses."""

    site: object  # cbench.localization.pyvene_adapter.Site
    dims: tuple[int, ...] | None = None  # None: every coordinate

    def frame(self, width: int) -> torch.Tensor:
        if self.dims is None:
            return torch.eye(width)
        f = torch.zeros(width, len(self.dims))
        for j, d in enumerate(self.dims):
            f[d, j] = 1.0
        return f


@dataclass(frozen=True)
class Location:
    name: str
    parts: tuple[Part, ...]
    nodes: frozenset[str]  # graph nodes it intervenes on (empty for the residual stream)

    @property
    def is_residual(self) -> bool:
        return not self.nodes


def parse_location(name: str, cfg) -> Location:
    """A :class:`Location` from its name (see the module doc), checked against ``cfg``."""
    from cbench.localization.pyvene_adapter import Site

    name = str(name).strip()
    n_layers, n_heads = int(cfg.n_layers), int(cfg.n_heads)

    def bad(why: str) -> UsageError:
        return UsageError(f"location {name!r}: {why} (locations look like a1.h0, m0, resid.1, a0.h0+m0 or m0[5,6])")

    if "+" in name:
        subs = [parse_location(p, cfg) for p in name.split("+")]
        if any(s.is_residual for s in subs):
            raise bad("only nodes can be joined with '+'")
        return Location(name, tuple(p for s in subs for p in s.parts), frozenset().union(*(s.nodes for s in subs)))
    m = _RESID_RE.match(name)
    if m:
        L = int(m[1])
        if L > n_layers:
            raise bad(f"the model has {n_layers} layers (resid.0 to resid.{n_layers})")
        site = Site("resid_pre", L) if L < n_layers else Site("resid_post", n_layers - 1)
        return Location(name, (Part(site),), frozenset())
    dims = None
    node = name
    m = _SLICE_RE.match(name)
    if m:
        node = m[1]
        dims = tuple(int(d) for d in m[2].split(","))
        if any(d >= int(cfg.d_model) for d in dims) or len(set(dims)) != len(dims):
            raise bad(f"dimensions must be distinct and below d_model {cfg.d_model}")
    head, mlp = _HEAD_RE.match(node), _MLP_RE.match(node)
    if not (head or mlp):
        raise bad("not a location name")
    if head:
        L, H = int(head[1]), int(head[2])
        if L >= n_layers or H >= n_heads:
            raise bad(f"the model has {n_layers} layers of {n_heads} heads")
        site = Site("head_z" if dims is None else "head_result", L, H)
    else:
        L = int(mlp[1])
        if L >= n_layers or cfg.attn_only:
            raise bad(f"the model has MLPs m0 to m{n_layers - 1}" if not cfg.attn_only else "the model has no MLPs")
        site = Site("mlp_out", L)
    return Location(name, (Part(site, dims),), frozenset({node}))


def candidate_locations(cfg) -> list[str]:
    """Every residual-stream layer and every node, in layer order."""
    out = []
    for L in range(int(cfg.n_layers)):
        out.append(f"resid.{L}")
        out.extend(f"a{L}.h{H}" for H in range(int(cfg.n_heads)))
        if not cfg.attn_only:
            out.append(f"m{L}")
    out.append(f"resid.{int(cfg.n_layers)}")
    return out


@dataclass
class Variable:
    name: str
    op_type: str
    encoding: str | None
    aligned: str  # the aligned location's name
    n_dims: int  # residual dimensions Tracr gave it (its natural subspace size), at least 1
    model_kind: str
    nodes: tuple[str, ...] = ()  # every node that computes it (a SelectorWidth: its head and its MLP)
    kind: str | None = None  # a variables model's kind of variable: shared, rotated, spread
    holds: tuple[str, ...] = ()  # every location that holds it (the aligned one first)
    shares_with: tuple[str, ...] = ()  # other variables computed by any of its nodes
    separates: bool | None = None  # False: no featurizer can do better than the full vector here
    why: str | None = None


def _ops(artifact) -> list[dict]:
    circuit = artifact.circuit or {}
    ops = (circuit.get("high_level") or {}).get("ops")
    if not ops:
        raise UsageError(f"case {artifact.case}: circuit.json has no high-level ops (high_level.ops); "
                         "causal variables need them")
    return list(ops)


def _declared(artifact) -> list[Variable]:
    """A variables model's variables, as its circuit.json lists them."""
    out = []
    for v in (artifact.circuit or {}).get("variables") or []:
        nodes = tuple(p["node"] for p in v["parts"])
        out.append(Variable(v["name"], "variable", None, v["location"], int(v["n_values"]), artifact.model_kind, nodes,
                            kind=v.get("kind"), holds=tuple(v.get("holds") or [v["location"]]),
                            shares_with=tuple(v.get("shares_component_with") or ()),
                            separates=v.get("separates"), why=v.get("why")))
    return out


def _holds(aligned: str) -> tuple[str, ...]:
    """The aligned location and the residual stream right after its last node (which holds the
    variable by construction)."""
    layers = [int(m[1]) for m in re.finditer(r"(?:^|\+)[am](\d+)", aligned)]
    return (aligned, f"resid.{max(layers) + 1}") if layers else (aligned,)


def _mark_separation(vs: list[Variable]) -> list[Variable]:
    """Variables whose nodes compute no other variable cannot separate featurizers: interchanging
    the full vector there is already the variable's interchange (marked ``separates: False``)."""
    for v in vs:
        others = tuple(w.name for w in vs if w is not v and set(w.nodes) & set(v.nodes))
        v.shares_with = others
        v.separates = bool(others)
        v.why = (f"its node(s) also compute {', '.join(others)}" if others
                 else "its node(s) compute nothing else: the full vector is the variable")
        v.holds = _holds(v.aligned)
    return vs


def variables(artifact) -> list[Variable]:
    """The case's causal variables with their aligned locations (ops order)."""
    if artifact.model_kind == "variables":
        return _declared(artifact)
    return _mark_separation(_variables_of_ops(artifact))


def _variables_of_ops(artifact) -> list[Variable]:
    ops = _ops(artifact)
    corr = artifact.correspondence
    out = []
    for op in ops:
        if op.get("type") in NOT_VARIABLES or op.get("component") in (None, "input"):
            continue
        dims = [int(d) for d in op.get("residual_dims") or []]
        if corr:
            nodes = []
            for entry in corr.get("nodes", []):
                if entry.get("high_level") == op["name"]:
                    nodes.extend(ll["node"] for ll in entry.get("low_level", []))
            if not nodes:
                continue
            aligned = "+".join(dict.fromkeys(nodes))
        else:
            if not dims:
                continue
            aligned = f"{op['component']}[{','.join(map(str, dims))}]"
        nodes = tuple(aligned.split("[")[0].split("+")) if corr else tuple(op.get("components") or [op["component"]])
        out.append(Variable(op["name"], str(op.get("type")), op.get("encoding"), aligned, max(1, len(dims)),
                            artifact.model_kind, nodes))
    return out


def variable(artifact, name: str) -> Variable:
    vs = variables(artifact)
    for v in vs:
        if v.name == name:
            return v
    skipped = [] if artifact.model_kind == "variables" else [op["name"] for op in _ops(artifact)
                                                             if op.get("type") in NOT_VARIABLES]
    if name in skipped:
        raise UsageError(f"{name!r} is an input or a Select (an attention pattern), not a variable a hidden "
                         f"vector holds; the variables of case {artifact.case} are: {', '.join(v.name for v in vs)}")
    raise UsageError(f"case {artifact.case} has no variable {name!r}{did_you_mean(name, [v.name for v in vs])}; "
                     f"its variables are: {', '.join(v.name for v in vs) or '(none)'}")


# ---------------------------------------------------------------------------- data
@dataclass
class VariableData:
    """Pairs for one variable: ``data.labels`` are the interchange labels; ``changed`` marks the
    valid positions where interchanging the variable changes the high-level output."""

    data: TaskData
    changed: torch.Tensor
    split: str
    source: str

    @property
    def n_examples(self) -> int:
        return self.data.n_examples

    def subset(self, idx) -> VariableData:
        d = self.data
        return VariableData(TaskData(d.base[idx], d.source[idx], d.labels[idx], d.valid[idx], d.task_type, d.split,
                                     d.dataset, d.revision, dict(d.info)), self.changed[idx], self.split, self.source)


def variable_data(rows: Sequence[Mapping], var_name: str, meta: Mapping, split: str, where: str,
                  n: int | None = None) -> VariableData:
    """:class:`VariableData` of ``var_name`` from counterfactual rows (the first ``n``)."""
    if not rows:
        raise UsageError(f"the {split} split has no rows")
    nodes = list(rows[0].get("high_level_nodes") or [])
    if var_name not in nodes:
        raise UsageError(f"the counterfactual dataset has no interchange labels for {var_name!r} "
                         f"(it has: {', '.join(nodes)})")
    i = nodes.index(var_name)
    rows = list(rows[:n] if n else rows)
    inter = [{"base_ids": r["base_ids"], "source_ids": r["source_ids"], "base_label": r["interchange_labels"][i]}
             for r in rows]
    base_rows = [{"base_ids": r["base_ids"], "source_ids": r["source_ids"], "base_label": r["base_label"]} for r in rows]
    data = from_rows(inter, meta, split, dataset=where)
    plain = from_rows(base_rows, meta, split, dataset=where)
    if data.task_type == "categorical":
        changed = data.labels != plain.labels
    else:
        changed = (data.labels - plain.labels).abs() > 1e-6
    changed &= data.valid
    return VariableData(data, changed, split, where)
