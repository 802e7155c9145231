"""``cbench.discover``: run a discovery method on a case, as ``cbench discover`` does."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cbench.api.results import DiscoveryResult
from cbench.errors import UsageError


MIB_PROTOCOL_METHODS = ("nap", "nap-ig", "ifr", "ugs")  #: the methods MIB's reference code runs otherwise than their papers


def discovery_hyperparameters(method: str, params: Mapping[str, Any] | None = None, *, ablation: str | None = None,
                              seed: int = 0, protocol: str = "cbench", spelling=None) -> dict[str, Any]:
    """The typed hyperparameters of ``method``: ``params`` with ``ablation``, ``seed`` (for the
    methods that draw at random, unless ``params`` gives one) and ``protocol`` folded in; checked
    before anything is loaded. ``spelling`` (:class:`~cbench.api.inputs.Spelling`): how messages
    name the arguments (the API's keywords by default)."""
    from cbench.api.inputs import API_SPELLING, check_protocol
    from cbench.discovery import method_spec, validate_hyperparameters

    say = spelling or API_SPELLING
    check_protocol(protocol)
    spec = method_spec(method)  # an unknown method: one line listing the methods, before any loading
    given = dict(params or {})
    if ablation is not None:
        if "ablation" not in spec.params:
            raise UsageError(f"{method} ablates nothing, so it takes no {say.flag('ablation')}")
        if given.get("ablation", ablation) != ablation:
            raise UsageError(f"{say.option('ablation', ablation)} and {say.param('ablation', given['ablation'])} "
                             "disagree")
        given["ablation"] = ablation
    if "seed" in spec.params and "seed" not in given:
        given["seed"] = seed
    if protocol == "mib":
        if not spec.has_mib_variant:
            raise UsageError(f"{method} runs the same under MIB's code; {say.option('protocol', 'mib')} applies to: "
                             + ", ".join(MIB_PROTOCOL_METHODS))
        if given.get("protocol", "mib") != "mib":
            raise UsageError(f"{say.option('protocol', 'mib')} and {say.param('protocol', given['protocol'])} disagree")
        given["protocol"] = "mib"
    return validate_hyperparameters(method, given)


@dataclass(frozen=True)
class Discovery:
    """One discovery run (:func:`run_discovery`)."""

    result: Any  #: the method's :class:`cbench.discovery.DiscoveryResult` (``extra``: what it says of its run)
    data: Any  #: the :class:`~cbench.tasks.data.TaskData` it ran on
    n_edges: int  #: edges of the model's graph
    document: dict  #: the checked ``cbench/edge-scores/v1`` document
    seconds: float  #: the run and the document, after the data and the model were loaded


# discover's default number of pairs per method: the smallest n (and every larger n measured) whose
# scores stay within 0.005 edge AUROC and a Spearman rank correlation of |score| >= 0.99 of the
# whole split's (up to 4,000 pairs) on cases 3, 13 and 18 (benchmarks/bench_discover_pairs.py,
# docs/performance.md). EAP and EAP-IG do not reach it below the whole split: they keep it.
STABLE_PAIRS = {"activation-patching": 500, "acdc": 1000}


def run_discovery(art, model_ref: Mapping[str, Any], method: str, hp: Mapping[str, Any], metric: str | None = None, *,
                  split: str = "validation", n_examples: int | None = None, seed: int = 0, sampled: bool = False,
                  progress: bool = False) -> Discovery:
    """Run ``method`` (hyperparameters from :func:`discovery_hyperparameters`) on the model
    artifact ``art`` with its counterfactual pairs of ``split`` (pairs sampled from meta.json
    when ``sampled``); ``model_ref`` (``{"repo", "revision", "kind"}``) goes into the document."""
    from cbench.discovery import discover as run_discover
    from cbench.discovery import to_edge_scores_document
    from cbench.runtime import CircuitRuntime
    from cbench.schemas import check
    from cbench.tasks.data import load_task_data

    if metric is not None:
        from cbench.tasks.metrics import check_metric

        check_metric(metric, art.task_type)
    if n_examples is None:  # measured by benchmarks/bench_discover_pairs.py
        n_examples = STABLE_PAIRS.get(method)
    data = load_task_data(art.case, art.meta, split=split, n_examples=n_examples, seed=seed, use_dataset=not sampled)
    rt = CircuitRuntime(art)
    t0 = time.perf_counter()
    result = run_discover(rt, data, method, hp, metric, progress=progress)
    doc = to_edge_scores_document(result, art.case, model_ref, d_model=int(art.config["d_model"]))
    check(doc, "edge-scores")
    return Discovery(result, data, rt.n_edges, doc, time.perf_counter() - t0)


def discover(case: Any, method: str, *, params: Mapping[str, Any] | None = None, metric: str | None = None,
             ablation: str | None = None, protocol: str = "cbench", split: str = "validation",
             n_examples: int | None = None, seed: int = 0, sampled: bool = False, progress: bool = False,
             revision: str | None = None, endpoint: str | None = None,
             hub: str | os.PathLike | None = None) -> DiscoveryResult:
    """Run the discovery ``method`` on ``case`` and return its edge scores.

    ``case``: a case name (``"case-3"``; pulled when not cached), a model artifact directory, a
    :class:`~cbench.api.results.PullResult` or a :class:`~cbench.artifacts.model.ModelArtifact`.
    ``method``: a built-in method (``"eap"``, ``"acdc"``, ... see ``cbench discover --help``), an
    installed one (the ``cbench.methods`` entry points) or one added with
    :func:`cbench.register_method`. ``params``: the method's hyperparameters (``cbench discover
    --param KEY=VALUE``); ``metric`` its loss (default per method and task); ``ablation`` how
    ablated edges are replaced (``resample``, ``mean``, ``zero``, ``optimal``) for methods that
    ablate. ``protocol``: ``"cbench"`` (default: the method as its paper defines it) or ``"mib"``
    (as MIB's reference code runs it, as ``cbench discover --protocol mib``; for nap, nap-ig, ifr
    and ugs; with ``ablation="optimal"``, the vectors learned as MIB's oa.py learns them;
    docs/mib-parity.md). The inputs are the case's counterfactual pairs of ``split`` (at most
    ``n_examples``; when None, as ``cbench discover``: activation-patching 500, acdc 1000, the
    other methods the whole split), or pairs sampled from meta.json with ``sampled=True``
    (``seed`` picks them, and seeds the methods that draw at random unless ``params`` gives a seed).

    >>> found = cbench.discover("case-3", "eap", n_examples=100)      # doctest: +SKIP
    >>> found.top(3)                                                  # doctest: +SKIP
    >>> cbench.discover("case-3", "nap", protocol="mib")              # doctest: +SKIP
    """
    from cbench.api.inputs import resolve_case

    from cbench.api import arguments as check

    check.n_examples("n_examples", n_examples, none_ok=True)
    check.seed("seed", seed)
    check.flag("sampled", sampled)
    check.flag("progress", progress)
    check.choice("split", split, check.SPLITS)
    hp = discovery_hyperparameters(method, params, ablation=ablation, seed=seed, protocol=protocol)
    resolved = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub)
    art = resolved.artifact
    run = run_discovery(art, resolved.model, method, hp, metric, split=split, n_examples=n_examples, seed=seed,
                        sampled=sampled, progress=progress)
    result = run.result
    return DiscoveryResult(
        case=art.case, method=result.method, edge_scores=MappingProxyType(result.edge_scores()),
        circuit=tuple(result.circuit_edges()), graph=result.graph, metric=result.metric,
        hyperparameters=MappingProxyType(dict(result.hyperparameters)), data=MappingProxyType(dict(result.data)),
        runtime_s=float(result.runtime_s), model=MappingProxyType(dict(resolved.model)),
        model_path=Path(art.path), document=run.document)
