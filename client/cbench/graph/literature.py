"""The literature's circuits by name: IOI and greater-than in GPT-2 small, docstring in
attn-only-4l, induction in a 2-layer attention-only model (docs/literature-circuits.md).

Each is a circuit document (``cbench/circuit/v1``, model kind ``pretrained``) shipped with the
client in ``cbench/graph/literature/``; a command's CIRCUIT argument ``literature:ioi`` reads it.
The documents are written by ``cbench_builders.literature.circuits`` from the papers' head classes
and the ACDC paper's edge-level encoding of them.
"""

from __future__ import annotations

import json
from importlib import resources

from cbench.errors import UsageError

PREFIX = "literature:"
NAMES = ("ioi", "greater-than", "docstring", "induction")


def is_literature_ref(text: str) -> bool:
    """Whether a CIRCUIT argument names a literature circuit (``literature:<name>``)."""
    return isinstance(text, str) and text.startswith(PREFIX)


def literature_circuit(ref: str) -> dict:
    """The circuit document of ``literature:<name>`` (or of ``<name>``)."""
    name = ref[len(PREFIX):] if is_literature_ref(ref) else ref
    if name not in NAMES:
        raise UsageError(f"no literature circuit {name!r}; there are: " + ", ".join(PREFIX + n for n in NAMES))
    text = resources.files("cbench.graph").joinpath("literature", f"{name}.json").read_text()
    return json.loads(text)


def check_shape(doc: dict, graph) -> None:
    """Refuse, in one line, a model whose graph is not the shape the circuit was found in."""
    g = doc["graph"]
    if (g["n_layers"], g["n_heads"], g["has_mlp"]) != (graph.n_layers, graph.n_heads, graph.has_mlp):
        kind = "" if g["has_mlp"] else ", attention only"
        mine = "" if graph.has_mlp else ", attention only"
        raise UsageError(f"{doc['case']} is a circuit of {doc['model']['name']} ({g['n_layers']} layers x "
                         f"{g['n_heads']} heads{kind}); this model has {graph.n_layers} x {graph.n_heads}{mine}")
