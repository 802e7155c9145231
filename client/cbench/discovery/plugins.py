"""Discovery methods from outside cbench: :func:`cbench.register_method` and the ``cbench.methods``
entry-point group.

A third-party method is a callable ``method(ctx, **hyperparameters)`` that receives the prepared
:class:`~cbench.discovery.base.Context` (``ctx.runtime``, ``ctx.data``, ``ctx.metric``,
``ctx.ablated``, ``ctx.graph``) and returns its edge scores: an array of one score per edge of
``ctx.graph.edges`` (the sign as the method defines it, docs/methods.md), a mapping of edge names to scores (edges
left out score 0), or a finished :class:`~cbench.discovery.base.DiscoveryResult`. cbench adds the
hyperparameters every method shares (``top_n`` and ``rel_threshold``, which pick the method's
circuit from its scores, and ``ablation`` unless the method ablates nothing), validates the
method's own ones, and turns the scores into a result like any built-in method's.

A package registers methods without importing cbench at install time, by entry point::

    [project.entry-points."cbench.methods"]
    theirs = "their_package.module:their_method"

The entry point's name is the method's name. Its object is the callable itself (a function, or a
class whose instances are callable; a class is instantiated with no arguments); these optional
attributes of it say more: ``params`` (a mapping of hyperparameter names to
:class:`~cbench.discovery.base.Param` or to plain default values), ``ablates`` (default True),
``construction`` (``"top-n"`` or ``"greedy"``) and ``metrics`` (the default metric for
categorical and numerical tasks, default ``("kl", "l2")``; gradient methods want
``("ce", "mae")``). ``cbench bench`` runs an installed method when
``--methods`` names it (installing a package never changes the default bench). Entry points are
listed when the registry is first used and imported only when their method is.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cbench.errors import UsageError

GROUP = "cbench.methods"
CONSTRUCTIONS = ("top-n", "greedy")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")  # the edge-scores schema's method.name


@dataclass(frozen=True)
class PluginMethod:
    """A discovery method registered from outside cbench; used wherever a
    :class:`~cbench.discovery.registry.MethodSpec` is (name, doc, construction, bench, params, load)."""

    name: str
    source: str  # where it came from: "register_method" or "entry point NAME = VALUE (DIST)"
    target: Any  # the callable, or an importlib.metadata.EntryPoint loaded on first use
    options: Mapping[str, Any] = field(default_factory=dict)  # register_method's params/ablates/...

    @property
    def doc(self) -> str:
        doc = self.options.get("doc") or inspect.getdoc(self._object()) or ""
        return doc.strip().splitlines()[0] if doc.strip() else f"{self.name} ({self.source})"

    @property
    def construction(self) -> str:
        return self._setting("construction", "top-n")

    @property
    def bench(self) -> bool:
        """Run by ``cbench bench`` without ``--methods``: only when registered with ``bench=True``
        (an installed package's methods run when named, so installing one never changes the
        default bench)."""
        return bool(self.options.get("bench", False))

    def default_metric(self, task_type: str) -> str:
        """The metric the method uses unless one is given: its ``metrics`` setting, a
        (categorical, numerical) pair; default ``("kl", "l2")`` as for ACDC. A gradient method
        wants ``("ce", "mae")``, as EAP has: KL's gradient is zero at the clean model."""
        pair = tuple(self._setting("metrics", ("kl", "l2")))
        if len(pair) != 2 or not all(isinstance(m, str) for m in pair):
            raise UsageError(f"method {self.name!r}: metrics is a (categorical, numerical) pair of metric names "
                             f"(got {pair!r})")
        return pair[0] if task_type == "categorical" else pair[1]

    @property
    def params(self) -> dict:
        return self._runner()[1]

    def load(self):
        """``(holder of PARAMS, run(ctx, **hyperparameters) -> DiscoveryResult)``, as for a built-in."""
        run, params, _own = self._runner()
        return types.SimpleNamespace(PARAMS=params), run

    # -------------------------------------------------------------------- internals
    def _object(self):
        target = self.target
        if hasattr(target, "load") and hasattr(target, "group"):  # an entry point
            try:
                target = target.load()
            except Exception as exc:  # noqa: BLE001 - the plug-in's own failure: one line naming it
                raise UsageError(f"method {self.name!r} ({self.source}) could not be imported: "
                                 f"{type(exc).__name__}: {exc}") from None
        return target

    def _setting(self, key: str, default):
        if key in self.options:
            return self.options[key]
        return getattr(self._object(), key, default)

    def _runner(self):
        check_name(self.name)
        obj = self._object()
        fn = obj() if inspect.isclass(obj) else obj
        if not callable(fn):
            raise UsageError(f"method {self.name!r} ({self.source}) is not callable: {fn!r}")
        construction = self._setting("construction", "top-n")
        if construction not in CONSTRUCTIONS:
            raise UsageError(f"method {self.name!r}: construction must be one of {', '.join(CONSTRUCTIONS)} "
                             f"(got {construction!r})")
        # the adapter imports the methods' shared base: loaded when first used, as built-in methods are
        adapter = importlib.import_module("cbench.discovery.third_party")
        params, own = adapter.method_params(self.name, self._setting("params", None),
                                            bool(self._setting("ablates", True)))
        return adapter.wrap(self.name, fn, own), params, own


def check_name(name) -> str:
    """A method name as the edge-scores schema takes it: lower case letters, digits, ``-``, ``_``
    and ``.``, starting with a letter or digit, at most 64 characters."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"a method name is lower case letters, digits, '-', '_' or '.' (at most 64, starting "
                         f"with a letter or digit), like 'my-method' (got {name!r})")
    return name


def entry_point_methods() -> dict[str, PluginMethod]:
    """The methods installed packages declare in the ``cbench.methods`` entry-point group
    (listed, not imported)."""
    from importlib import metadata

    try:
        eps = metadata.entry_points(group=GROUP)
    except Exception:  # noqa: BLE001  # pragma: no cover - broken metadata of some installed package
        return {}
    out: dict[str, PluginMethod] = {}
    for ep in eps:
        dist = getattr(ep, "dist", None)
        where = f" ({dist.name} {dist.version})" if dist is not None else ""
        out.setdefault(ep.name, PluginMethod(ep.name, f"entry point {ep.name} = {ep.value}{where}", ep))
    return out


def registered_method(name: str, method: Any, params: Mapping[str, Any] | None = None, *, doc: str | None = None,
                      ablates: bool = True, construction: str = "top-n", bench: bool = False,
                      metrics: tuple[str, str] | None = None) -> PluginMethod:
    """A :class:`PluginMethod` for :func:`cbench.register_method`, checked now (not at first use)."""
    check_name(name)
    if not callable(method):
        raise UsageError(f"register_method({name!r}, ...): the method must be callable (got {method!r})")
    options: dict[str, Any] = {"ablates": bool(ablates), "construction": construction, "bench": bool(bench)}
    if params is not None:
        options["params"] = dict(params)
    if doc is not None:
        options["doc"] = doc
    if metrics is not None:
        options["metrics"] = tuple(metrics)
    spec = PluginMethod(name, "register_method", method, types.MappingProxyType(options))
    spec.load()  # bad params or construction: the error now, where the call is
    spec.default_metric("categorical")
    return spec
