"""The registry of discovery methods: each method's name, the module and function that run it, its
hyperparameter specs and how circuits are built from its scores. Imports no method module until
one is used. Methods of other packages join it through the ``cbench.methods`` entry points or
:func:`register` (:mod:`cbench.discovery.plugins`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

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

    @property
    def has_mib_variant(self) -> bool:
        """Whether MIB's code runs this method differently (it takes ``protocol``: nap, nap-ig, ifr, ugs)."""
        return "protocol" in self.params


BUILTIN: dict[str, MethodSpec] = {
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


class MethodRegistry(MutableMapping):
    """The methods by name: the built-in ones, then those of installed packages (the
    ``cbench.methods`` entry points, listed on first use, :mod:`cbench.discovery.plugins`), then
    those registered in this process (:func:`register`). A built-in name is never taken over."""

    def __init__(self, builtin: Mapping[str, MethodSpec]):
        self._specs: dict = dict(builtin)
        self._builtin = frozenset(builtin)
        self._entry_points_read = False

    def _ensure(self) -> dict:
        if not self._entry_points_read:
            self._entry_points_read = True
            from cbench.discovery.plugins import entry_point_methods

            for name, spec in entry_point_methods().items():
                self._specs.setdefault(name, spec)
        return self._specs

    def __getitem__(self, name):
        return self._ensure()[name]

    def __setitem__(self, name, spec) -> None:
        if name in self._builtin:
            raise UsageError(f"{name!r} is a built-in method; register yours under another name")
        self._ensure()[name] = spec

    def __delitem__(self, name) -> None:
        if name in self._builtin:
            raise UsageError(f"{name!r} is a built-in method and cannot be removed")
        del self._ensure()[name]

    def __iter__(self):
        return iter(self._ensure())

    def __len__(self) -> int:
        return len(self._ensure())

    def __repr__(self) -> str:
        return f"MethodRegistry({', '.join(self._ensure())})"

    def reload_entry_points(self) -> None:
        """Forget the entry-point methods and read them again on next use (after installing a
        package in a running process)."""
        from cbench.discovery.plugins import PluginMethod

        for name in [n for n, s in self._specs.items() if isinstance(s, PluginMethod) and s.source != "register_method"]:
            del self._specs[name]
        self._entry_points_read = False


METHODS: MethodRegistry = MethodRegistry(BUILTIN)


def register(name: str, method, params: Mapping[str, Any] | None = None, *, doc: str | None = None,
             ablates: bool = True, construction: str = "top-n", bench: bool = False,
             metrics: tuple[str, str] | None = None, replace: bool = False):
    """Add a discovery method (see :func:`cbench.discovery.plugins.registered_method` for what
    ``method`` is); a name already registered needs ``replace=True``, a built-in name is refused."""
    from cbench.discovery.plugins import registered_method

    spec = registered_method(name, method, params, doc=doc, ablates=ablates, construction=construction, bench=bench,
                             metrics=metrics)
    if name in BUILTIN:
        raise UsageError(f"{name!r} is a built-in method; register yours under another name")
    if name in METHODS and not replace:
        raise UsageError(f"method {name!r} is already registered ({getattr(METHODS[name], 'source', 'built in')})"
                         + "; pass replace=True to replace it")
    METHODS[name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a method registered with :func:`register` (or an installed one, until the entry
    points are read again)."""
    if name not in METHODS:
        raise UsageError(f"no method {name!r} is registered")
    del METHODS[name]


def bench_methods() -> tuple[str, ...]:
    """The methods ``cbench bench`` runs by default: every registered method marked ``bench``."""
    return tuple(name for name, spec in METHODS.items() if spec.bench)


def method_spec(name: str) -> MethodSpec:
    if name not in METHODS:
        raise UsageError(f"unknown method {name!r}{did_you_mean(str(name), METHODS)}; methods: {', '.join(METHODS)}")
    return METHODS[name]


