"""How a discovery method from outside cbench runs (:mod:`cbench.discovery.plugins` registers it):
its hyperparameter specs (its own, and the ones every method shares) and its scores turned into a
:class:`~cbench.discovery.base.DiscoveryResult` like a built-in method's. Loaded by the registry
when such a method is first used, as the built-in methods' modules are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from cbench.discovery.base import COMMON_PARAMS, DiscoveryResult, Param, finish
from cbench.errors import UsageError

SHARED = ("ablation", "top_n", "rel_threshold")  # hyperparameters cbench adds to every plug-in method


def _as_param(method: str, name: str, value: Any):
    if isinstance(value, Param):
        return value
    if value is None or not isinstance(value, (bool, int, float, str)):
        raise UsageError(f"method {method!r}: hyperparameter {name!r} needs a default of type bool, int, float or "
                         f"str, or a cbench.discovery.Param (got {value!r})")
    return Param(type(value), value)


def method_params(name: str, own: Mapping[str, Any] | None, ablates: bool) -> tuple[dict, tuple[str, ...]]:
    """(every hyperparameter spec of a plug-in method, the names the method itself takes)."""
    own = dict(own or {})
    for key in own:
        if not isinstance(key, str) or not key.isidentifier():
            raise UsageError(f"method {name!r}: hyperparameter names are Python identifiers (got {key!r})")
    specs = {k: _as_param(name, k, v) for k, v in own.items()}
    for key in SHARED:
        if key == "ablation" and not ablates:
            continue
        specs.setdefault(key, COMMON_PARAMS[key])
    return specs, tuple(own)


def wrap(name: str, fn: Callable, own: tuple[str, ...]):
    def run(ctx, **hp):
        t0 = time.perf_counter()
        out = fn(ctx, **{k: hp[k] for k in own})
        if isinstance(out, DiscoveryResult):
            return out
        return finish(ctx, name, hp, edge_vector(name, ctx.graph, out), None, t0)

    return run


def edge_vector(name: str, graph, scores):
    """A method's scores as one float per edge of ``graph`` (in graph order)."""
    import numpy as np

    if isinstance(scores, Mapping):
        index = {e.name: i for i, e in enumerate(graph.edges)}
        out = np.zeros(graph.n_edges)
        for edge, value in scores.items():
            if edge not in index:
                from cbench.errors import did_you_mean

                raise UsageError(f"method {name!r} scored {edge!r}, which is not an edge of the model's graph"
                                 + did_you_mean(str(edge), index))
            out[index[edge]] = float(value)
        return out
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().numpy()
    arr = np.asarray(scores, dtype=np.float64).reshape(-1) if scores is not None else np.zeros(0)
    if arr.shape != (graph.n_edges,):
        raise UsageError(f"method {name!r} returned {arr.size} scores; the model's graph has {graph.n_edges} edges "
                         "(one score per edge of ctx.graph.edges, in that order)")
    return arr
