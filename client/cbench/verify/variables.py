"""Gates of the variables tier: where each causal variable of a variables model lives, proved by
interchange interventions with plain TransformerLens hooks (not the localization track's pyvene
path).

A variables model (``model_kind: "variables"``) lists its variables in ``circuit.json``
(``variables``): each with its kind (``shared``: it shares one component with other variables,
each in its own subspace; ``rotated``: the same in a residual basis rotated away from the
standard axes; ``spread``: it is written by several components), its true location and, per
component of that location, an orthonormal basis of the variable's subspace in the residual
stream's coordinates. On each pair set the gates are:

* ``accuracy``: the model's output equals the high-level model's (share of examples, >= 0.999);
* ``iia_true_subspace[X]``: interchanging the variable's subspace of every component of its true
  location gives the high-level model's interchange output (IIA per example, >= 0.95);
* ``iia_whole_component[X]`` (a variable sharing a component): interchanging those components
  whole gives at most 0.8: the component holds something else, so a featurizer must isolate it;
* ``iia_one_component[X]`` (a spread variable): the subspace of any one of its components alone
  gives at most 0.85: no single component holds it;
* ``axis_alignment[X]`` (a rotated variable): the share of the subspace's projector on its ``k``
  largest standard dimensions is at most 0.6 (an axis-aligned subspace gives 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.data import TaskData
from cbench.verify.gates import Gate, VerifyReport

MIN_ACCURACY = 0.999
MIN_IIA_TRUE = 0.95
MAX_IIA_WHOLE = 0.8
MAX_IIA_ONE_PART = 0.85
MAX_AXIS_ALIGNMENT = 0.6
_MLP = re.compile(r"^m(\d+)$")


def spec_variables(circuit: Mapping) -> list[dict]:
    vs = circuit.get("variables")
    if not isinstance(vs, list) or not vs:
        raise UsageError("circuit.json of a variables model has no variables list")
    return vs


def part_hook(node: str) -> str:
    m = _MLP.match(node)
    if not m:
        raise UsageError(f"variables gates intervene on MLP outputs only (got {node!r})")
    return f"blocks.{int(m[1])}.hook_mlp_out"


def part_bases(var: Mapping) -> list[tuple[str, torch.Tensor]]:
    """``(node, Q [d_model, k])`` per component of the variable's true location."""
    return [(p["node"], torch.as_tensor(np.asarray(p["basis"], dtype=np.float64), dtype=torch.float32))
            for p in var["parts"]]


@torch.no_grad()
def hook_interchange(model, base: torch.Tensor, source: torch.Tensor,
                     parts: Sequence[tuple[str, torch.Tensor | None]]) -> torch.Tensor:
    """Logits on ``base`` with, at every position, each node's output moved to the source's along
    its basis ``Q`` (``h_b + Q Q^T (h_s - h_b)``; ``Q`` None: the whole output)."""
    _, cache = model.run_with_cache(source, names_filter=lambda n: n.endswith("hook_mlp_out"))
    hooks = []
    for node, Q in parts:
        name = part_hook(node)

        def fn(x, hook, Q=Q, name=name):
            s = cache[name]
            return s.clone() if Q is None else x + ((s - x) @ Q) @ Q.T

        hooks.append((name, fn))
    return model.run_with_hooks(base, fwd_hooks=hooks)


def example_accuracy(logits: torch.Tensor, data: TaskData) -> float:
    """Share of examples whose every valid position's argmax equals its label (MIB's IIA)."""
    hit = (logits.argmax(-1) == data.labels) | ~data.valid
    return float(hit.all(1).double().mean())


def axis_alignment(Q: torch.Tensor) -> float:
    """Share of ``Q Q^T``'s trace on its ``k`` largest diagonal entries (1: axis-aligned)."""
    k = Q.shape[1]
    diag = (Q.double() ** 2).sum(1)
    return float(diag.topk(k).values.sum() / k)


def variable_gates(model, meta: Mapping, circuit: Mapping, pairs: str, n_pairs: int, seed: int) -> list[Gate]:
    from cbench.tasks.variables import variable_pairs, variables_pairs

    gates = []
    plain = variables_pairs(meta, "validation" if pairs == "validation" else "fresh", n_pairs, seed)
    with torch.no_grad():
        acc = example_accuracy(model(plain.base), plain)
    gates.append(Gate("accuracy", pairs, acc, ">=", MIN_ACCURACY, acc >= MIN_ACCURACY))
    split = "validation" if pairs == "validation" else "fresh"
    for var in spec_variables(circuit):
        name, kind = var["name"], var["kind"]
        data, _changed = variable_pairs(meta, name, "random", split, n_pairs, seed)
        parts = part_bases(var)
        v = example_accuracy(hook_interchange(model, data.base, data.source, parts), data)
        gates.append(Gate(f"iia_true_subspace[{name}]", pairs, v, ">=", MIN_IIA_TRUE, v >= MIN_IIA_TRUE,
                          f"{var['location']}, k={[int(q.shape[1]) for _, q in parts]}"))
        if var.get("shares_component_with"):
            v = example_accuracy(hook_interchange(model, data.base, data.source, [(n, None) for n, _ in parts]), data)
            gates.append(Gate(f"iia_whole_component[{name}]", pairs, v, "<=", MAX_IIA_WHOLE, v <= MAX_IIA_WHOLE,
                              f"shared with {', '.join(var['shares_component_with'])}"))
        if kind == "spread":
            one = max(example_accuracy(hook_interchange(model, data.base, data.source, [p]), data) for p in parts)
            gates.append(Gate(f"iia_one_component[{name}]", pairs, one, "<=", MAX_IIA_ONE_PART, one <= MAX_IIA_ONE_PART,
                              f"best single component of {var['location']}"))
        if kind == "rotated" and pairs == "validation":  # a property of the weights: once
            al = max(axis_alignment(q) for _, q in parts)
            gates.append(Gate(f"axis_alignment[{name}]", "weights", al, "<=", MAX_AXIS_ALIGNMENT,
                              al <= MAX_AXIS_ALIGNMENT))
    return gates


def verify_variables(model, meta: Mapping, circuit: Mapping, n_pairs: int = 1000, seed: int = 20261122) -> VerifyReport:
    """The variables tier's gates on the validation split's pairs and on ``n_pairs`` fresh ones."""
    gates = variable_gates(model, meta, circuit, "validation", n_pairs, 0)
    gates += variable_gates(model, meta, circuit, "fresh", n_pairs, seed)
    return VerifyReport(str(meta.get("case")), "variables", gates, [], {"validation": n_pairs, "fresh": n_pairs})
