"""Circuit discovery methods, one module each, behind one registry.

``METHODS`` maps a method name to its :class:`MethodSpec` (module, entry point, hyperparameter
specs). :func:`discover` validates hyperparameters, prepares the data, metric and ablated
activations once (:func:`cbench.discovery.base.prepare`) and returns a
:class:`~cbench.discovery.base.DiscoveryResult` with a score for every edge, the proposed circuit
(``in_graph``), the hyperparameters, data split and size, and the wall time.
:func:`to_edge_scores_document` turns a result into a schema-valid ``cbench/edge-scores/v1``
document.

Methods: ``acdc``, ``eap``, ``eap-ig-inputs``, ``eap-ig-activations``, ``sp`` (node subnetwork
probing), ``edge-sp`` (edgewise subnetwork probing), ``activation-patching`` (exact, per edge),
``random``, and MIB's other baselines: ``nap`` and ``nap-ig`` (node attribution patching, plain
and with integrated gradients, at neuron or node granularity), ``ifr`` (information flow
routes) and ``ugs`` (uniform gradient sampling); and ``atp-star`` (AtP*: attribution patching with
the QK fix and GradDrop, Kramár et al. 2024). Each spec says how circuits are built from
its scores (``construction``: top-n, or greedy from the logits for IFR, MIB appendix E.1) and
whether ``cbench bench`` runs it by default (``bench``). Default metrics per InterpBench appendix D (:func:`cbench.tasks.metrics.default_metric`).
Scores: the loss increase when the edge is ablated (positive = helpful); SP methods: mask logits.

May import: ``cbench.runtime``, ``cbench.tasks``, ``cbench.artifacts``, ``cbench.hub``, ``cbench.schemas``,
``cbench.graph``, ``cbench.errors`` (never scoring: a method does not see the ground truth).
"""

from __future__ import annotations

from typing import Any, Mapping

from cbench.discovery.registry import METHODS, MethodSpec, bench_methods, method_spec  # noqa: F401

#: what a method of your own uses (docs/new-method.md), from :mod:`cbench.discovery.base` on first use
_FROM_BASE = ("Context", "DiscoveryResult", "Param", "COMMON_PARAMS")


def __getattr__(name: str):
    if name in _FROM_BASE:
        from cbench.discovery import base

        return getattr(base, name)
    raise AttributeError(f"module 'cbench.discovery' has no attribute {name!r}")











def validate_hyperparameters(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Typed hyperparameters with defaults; UsageError (one line) on unknown keys or bad values."""
    from cbench.discovery.base import validate_params

    return validate_params(method, method_spec(method).params, dict(params or {}))


def discover(model, data, method: str, params: Mapping[str, Any] | None = None, metric: str | None = None,
             progress: bool = True):
    """Run ``method`` on ``model`` (HookedTransformer, ModelArtifact or CircuitRuntime) with
    ``data`` (:class:`cbench.tasks.data.TaskData`). Returns a DiscoveryResult."""
    from cbench.discovery.base import prepare

    spec = method_spec(method)
    hp = validate_hyperparameters(method, params)
    if metric is None and hasattr(spec, "default_metric"):  # a method from another package names its own
        metric = spec.default_metric(data.task_type)
    ctx = prepare(model, data, method, metric, hp.get("ablation", "resample"), progress, protocol=hp.get("protocol"))
    _mod, fn = spec.load()
    return fn(ctx, **hp)


def to_edge_scores_document(result, case: str, model: Mapping[str, Any] | None = None, d_model: int | None = None,
                            submitter: Mapping[str, Any] | None = None, created: str | None = None) -> dict:
    """A ``cbench/edge-scores/v1`` document for ``result``.

    ``model``: ``{"repo", "revision", "kind"}`` (repo/revision None when not from a hub).
    """
    import datetime

    import cbench.about as cbench

    g = result.graph
    model = dict(model or {"repo": None, "revision": None, "kind": "tracr"})
    model = {k: model.get(k) for k in ("repo", "revision", "kind")}
    nodes_in = result.nodes_in_graph()
    nodes = {}
    # NAP under --protocol mib: every node's neuron scores, the key of MIB's graph JSON (MIB's
    # neuron-level CPR/CMD read them: cbench.scoring.mib_neurons)
    neurons = (result.extra or {}).get("neuron_scores") if result.hyperparameters.get("protocol") == "mib" else None
    forward = {n: i for i, n in enumerate(g.forward_nodes)}
    for n in g.node_names:
        entry: dict[str, Any] = {"in_graph": bool(nodes_in[n])}
        if result.node_scores and n in result.node_scores:
            entry["score"] = float(result.node_scores[n])
        if neurons is not None and n in forward:
            entry["neurons_scores"] = [float(x) for x in neurons[forward[n]]]
        nodes[n] = entry
    edges = {e.name: {"score": float(s), "in_graph": bool(ig)}
             for e, s, ig in zip(g.edges, result.scores, result.in_graph)}
    doc = {
        "schema": "cbench/edge-scores/v1",
        "case": str(case).removeprefix("case-"),
        "model": model,
        "method": {"name": result.method, "hyperparameters": dict(result.hyperparameters)},
        "data": dict(result.data),
        "runtime_s": round(float(result.runtime_s), 6),
        "created": created or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cbench_version": cbench.__version__,
        "cfg": {"n_layers": g.n_layers, "n_heads": g.n_heads, "parallel_attn_mlp": g.parallel_attn_mlp,
                "d_model": int(d_model) if d_model else None, "has_mlp": g.has_mlp},
        "nodes": nodes,
        "edges": edges,
    }
    if doc["cfg"]["d_model"] is None:
        del doc["cfg"]["d_model"]
    if submitter:
        doc["submitter"] = dict(submitter)
    if result.extra:
        doc["method"]["details"] = {k: v for k, v in result.extra.items() if isinstance(v, (int, float, str, bool))}
    return doc
