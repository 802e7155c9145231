"""``cbench.register_method``: your own discovery method beside the built-in ones.

See :mod:`cbench.discovery.plugins` for what a method is, and docs/new-method.md for a walk-through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def register_method(name: str, method: Callable[..., Any] | type, params: Mapping[str, Any] | None = None, *,
                    doc: str | None = None, ablates: bool = True, construction: str = "top-n",
                    bench: bool = False, metrics: tuple[str, str] | None = None, replace: bool = False) -> None:
    """Make ``method`` a discovery method called ``name`` in this process: :func:`cbench.discover`,
    :func:`cbench.bench` and :func:`cbench.evaluate` then run and score it like a built-in one.

    ``method(ctx, **params)`` gets the prepared :class:`cbench.discovery.base.Context`
    (``ctx.runtime``: the model as a graph, :class:`cbench.runtime.CircuitRuntime`; ``ctx.data``:
    the pairs; ``ctx.metric``: the loss bound to the clean outputs; ``ctx.ablated``: every node's
    ablated output; ``ctx.graph``) and returns one score per edge of ``ctx.graph.edges`` (an
    array or tensor; positive: the edge helps), a dict of edge names to scores, or a
    :class:`cbench.discovery.DiscoveryResult`. A class is instantiated with no arguments.

    ``params``: the method's own hyperparameters, name -> default value or
    :class:`cbench.discovery.Param`; cbench adds ``top_n`` and ``rel_threshold`` (which edges
    form the method's circuit) and, when ``ablates``, ``ablation``. ``construction``: how
    faithfulness circuits are built from the scores (``top-n`` or ``greedy``). ``bench``: run it
    in :func:`cbench.bench` without naming it. ``metrics``: the default loss for categorical and
    numerical tasks, default ``("kl", "l2")`` as ACDC's; a gradient method wants ``("ce", "mae")``
    as EAP's (KL's gradient vanishes at the clean model). ``replace``: replace a method
    registered before (a built-in name is always refused).

    Installed packages register methods through the ``cbench.methods`` entry-point group instead,
    which also makes them known to the ``cbench`` command (see docs/new-method.md).
    """
    from cbench.api.arguments import flag
    from cbench.discovery.registry import register

    for key, value in (("ablates", ablates), ("bench", bench), ("replace", replace)):
        flag(key, value)
    register(name, method, params, doc=doc, ablates=ablates, construction=construction, bench=bench,
             metrics=metrics, replace=replace)


def unregister_method(name: str) -> None:
    """Remove a method added with :func:`register_method`."""
    from cbench.discovery.registry import unregister

    unregister(name)


def methods() -> dict[str, str]:
    """Every discovery method by name, with its one-line description (built-in, installed and
    registered ones)."""
    from cbench.discovery import METHODS

    out = {}
    for name, spec in METHODS.items():
        try:
            out[name] = spec.doc
        except Exception as exc:  # noqa: BLE001 - an installed method that cannot be imported says why
            out[name] = f"(cannot be loaded: {exc})"
    return out
