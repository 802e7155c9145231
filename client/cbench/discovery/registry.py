"""The registry of discovery methods: each method's name, the module and function that run it, its
hyperparameter specs and how circuits are built from its scores. Imports no method module until
one is used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from cbench.errors import UsageError, did_you_mean


@dataclass(frozen=True)
class MethodSpec:
    name: str
    module: str
    function: str
    doc: str
    params_attr: str = "PARAMS"  # the module attribute holding the hyperparameter specs
    construction: str = "top-n"  # how circuits are built from the scores (cbench.graph.circuits)
    bench: bool = True  # run by `cbench bench` when no method list is given

    def load(self):
        mod = importlib.import_module(f"cbench.discovery.{self.module}")
        return mod, getattr(mod, self.function)

    @property
    def params(self):
        return getattr(self.load()[0], self.params_attr)


METHODS: dict[str, MethodSpec] = {
    "acdc": MethodSpec("acdc", "acdc", "run", "ACDC: reverse topological pruning with a threshold"),
    "eap": MethodSpec("eap", "eap", "run", "edge attribution patching"),
    "eap-ig-inputs": MethodSpec("eap-ig-inputs", "eap_ig", "run_inputs", "EAP with integrated gradients on the input embeddings"),
    "eap-ig-activations": MethodSpec("eap-ig-activations", "eap_ig", "run_activations", "EAP with integrated gradients per layer"),
    "sp": MethodSpec("sp", "subnetwork_probing", "run_nodes", "node subnetwork probing (hard-concrete node masks)"),
    "edge-sp": MethodSpec("edge-sp", "subnetwork_probing", "run_edges", "edgewise subnetwork probing"),
    "activation-patching": MethodSpec("activation-patching", "activation_patching", "run",
                                      "exact patching of every edge (the bench's oracle row)"),
    "random": MethodSpec("random", "random_scores", "run", "uniform random scores in [-1, 1]"),
    "nap": MethodSpec("nap", "nap", "run", "node attribution patching (neurons or nodes)"),
    "nap-ig": MethodSpec("nap-ig", "nap", "run_ig", "node attribution patching with integrated gradients",
                         params_attr="PARAMS_IG"),
    "ifr": MethodSpec("ifr", "ifr", "run", "information flow routes (normalized proximity per destination)",
                      construction="greedy"),
    "ugs": MethodSpec("ugs", "ugs", "run", "uniform gradient sampling (per-edge mask probabilities)"),
    "atp-star": MethodSpec("atp-star", "atp_star", "run",
                           "AtP*: attribution patching with the QK fix and GradDrop (Kramar et al. 2024)"),
}


def bench_methods() -> tuple[str, ...]:
    """The methods ``cbench bench`` runs by default: every registered method marked ``bench``."""
    return tuple(name for name, spec in METHODS.items() if spec.bench)


def method_spec(name: str) -> MethodSpec:
    if name not in METHODS:
        raise UsageError(f"unknown method {name!r}{did_you_mean(str(name), METHODS)}; methods: {', '.join(METHODS)}")
    return METHODS[name]


