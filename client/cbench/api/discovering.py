"""``cbench.discover``: run a discovery method on a case, as ``cbench discover`` does."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cbench.api.results import DiscoveryResult
from cbench.errors import UsageError


def discover(case: Any, method: str, *, params: Mapping[str, Any] | None = None, metric: str | None = None,
             ablation: str | None = None, split: str = "validation", n_examples: int | None = None,
             seed: int = 0, sampled: bool = False, progress: bool = False, revision: str | None = None,
             endpoint: str | None = None, hub: str | os.PathLike | None = None) -> DiscoveryResult:
    """Run the discovery ``method`` on ``case`` and return its edge scores.

    ``case``: a case name (``"case-3"``; pulled when not cached), a model artifact directory, a
    :class:`~cbench.api.results.PullResult` or a :class:`~cbench.artifacts.model.ModelArtifact`.
    ``method``: a built-in method (``"eap"``, ``"acdc"``, ... see ``cbench discover --help``), an
    installed one (the ``cbench.methods`` entry points) or one added with
    :func:`cbench.register_method`. ``params``: the method's hyperparameters (``cbench discover
    --param KEY=VALUE``); ``metric`` its loss (default per method and task); ``ablation`` how
    ablated edges are replaced (``resample``, ``mean``, ``zero``, ``optimal``) for methods that
    ablate. The inputs are the case's counterfactual pairs of ``split`` (at most ``n_examples``;
    all of them when None), or pairs sampled from meta.json with ``sampled=True`` (``seed``
    picks them, and seeds the methods that draw at random unless ``params`` gives a seed).

    >>> found = cbench.discover("case-3", "eap", n_examples=100)      # doctest: +SKIP
    >>> found.top(3)                                                  # doctest: +SKIP
    """
    from cbench.api.inputs import resolve_case
    from cbench.discovery import discover as run_discover
    from cbench.discovery import (
        method_spec,
        to_edge_scores_document,
        validate_hyperparameters,
    )
    from cbench.schemas import check

    spec = method_spec(method)  # an unknown method: one line listing the methods, before any loading
    given = dict(params or {})
    if ablation is not None:
        if "ablation" not in spec.params:
            raise UsageError(f"{method} ablates nothing, so it takes no ablation")
        if given.get("ablation", ablation) != ablation:
            raise UsageError(f"ablation={ablation!r} and params['ablation']={given['ablation']!r} disagree")
        given["ablation"] = ablation
    if "seed" in spec.params and "seed" not in given:
        given["seed"] = seed
    hp = validate_hyperparameters(method, given)
    resolved = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub)
    art = resolved.artifact
    if metric is not None:
        from cbench.tasks.metrics import check_metric

        check_metric(metric, art.task_type)
    if n_examples is not None and (isinstance(n_examples, bool) or not isinstance(n_examples, int) or n_examples < 1):
        raise UsageError(f"n_examples must be a positive integer (got {n_examples!r})")
    from cbench.runtime import CircuitRuntime
    from cbench.tasks.data import load_task_data

    data = load_task_data(art.case, art.meta, split=split, n_examples=n_examples, seed=seed, use_dataset=not sampled)
    result = run_discover(CircuitRuntime(art), data, method, hp, metric, progress=progress)
    doc = to_edge_scores_document(result, art.case, resolved.model, d_model=int(art.config["d_model"]))
    check(doc, "edge-scores")
    return DiscoveryResult(
        case=art.case, method=result.method, edge_scores=MappingProxyType(result.edge_scores()),
        circuit=tuple(result.circuit_edges()), graph=result.graph, metric=result.metric,
        hyperparameters=MappingProxyType(dict(result.hyperparameters)), data=MappingProxyType(dict(result.data)),
        runtime_s=float(result.runtime_s), model=MappingProxyType(dict(resolved.model)),
        model_path=Path(art.path), document=doc)
