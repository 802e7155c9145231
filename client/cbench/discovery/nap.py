"""NAP and NAP-IG (MIB appendix E.2): node attribution patching, plain and with integrated
gradients.

NAP is EAP with the gradient taken at the node's output instead of the destination's input:
score(u) = -(a_u - a'_u) . d loss / d a_u, summed over examples' positions and averaged over
examples (the loss is a mean over examples). Because ``a_u`` enters every destination it has an
edge to with coefficient 1, d loss / d a_u is the sum of the gradients at those destinations'
inputs (:func:`cbench.runtime.input_gradients.node_gradients`), so one forward and one backward
pass per chunk of examples scores every node (and every neuron). NAP-IG replaces the gradient by
its mean over Z interpolation points alpha = k / Z, k = 1 .. Z, between the ablated and the
clean output of the node's group (the input; the heads of one layer; one MLP), as EAP-IG
(activations) does: ``steps`` x depth rows of examples, batched.

Granularity (``granularity``):

* ``neuron`` (MIB's choice; the default): a neuron is one dimension d of a node's output (the
  node's write to the residual stream, d_model of them per node), scored by the d-th term of
  the product. A node enters a circuit as soon as one of its neurons does, so the node's score
  is its neuron score of largest magnitude (with its sign).
* ``node``: the node's score is the whole product (the sum over its neurons).

``protocol="mib"`` runs them as MIB's reference code does (EAP-IG branch MIB,
``attribute_node.py``): an MLP's output difference is multiplied by the gradient at its **input**
(``hook_mlp_in``; heads and the input node keep their output gradient), and NAP-IG is
"NAP-IG-inputs": only the input embedding is interpolated, alpha = k / Z for k = 1 .. Z, and every
node's gradient comes from those runs (``get_scores_eap_ig``).

Node scores become edge scores (for AUROC, CPR/CMD and ``in_graph``) by the rule subnetwork
probing uses: an edge is in a node circuit exactly when both its ends are, and ``input`` and
``logits`` are always there, so an edge's score is the score of the end with the smaller
magnitude (``input`` and ``logits`` count as infinitely important; ``input -> logits`` gets the
largest score in the graph). Node scores go to the document's ``nodes`` (``score``); the neuron
scores stay in the result's ``extra["neuron_scores"]`` ([F, d_model] as nested lists).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, clean_point_gradients, finish, progress_bar
from cbench.discovery.eap_ig import collect_gradients
from cbench.runtime.memory import row_parts, rows_per_pass

GRANULARITIES = ("neuron", "node")

_COMMON = {
    "granularity": Param(str, "neuron", choices=GRANULARITIES, doc="score neurons (MIB) or whole nodes"),
    "ablation": COMMON_PARAMS["ablation"],
    "top_n": COMMON_PARAMS["top_n"],
    "rel_threshold": COMMON_PARAMS["rel_threshold"],
    "protocol": COMMON_PARAMS["protocol"],
}
PARAMS = {"batch_size": Param(int, 512, low=1, doc="examples per forward/backward pass"), **_COMMON}
PARAMS_IG = {
    "steps": Param(int, 5, low=1, high=1000, doc="Z, the number of interpolation steps"),
    "batch_rows": Param(int, 4096, low=1, doc="rows (examples x steps x groups) per forward/backward pass"),
    **_COMMON,
}


def node_scores_of(neurons: np.ndarray, granularity: str) -> np.ndarray:
    """Per forward node from per-neuron scores ``[F, D]`` (see the module docstring)."""
    if granularity == "node":
        return neurons.sum(1)
    pick = np.abs(neurons).argmax(1)
    return neurons[np.arange(neurons.shape[0]), pick]


def edge_scores_from_nodes(graph, node_scores: np.ndarray) -> np.ndarray:
    """Edge scores from forward-node scores: the end of smaller magnitude (``input`` and
    ``logits`` always present); ``input -> logits`` gets the largest magnitude in the graph."""
    s = np.asarray(node_scores, dtype=np.float64).copy()
    top = float(np.abs(s[1:]).max()) + 1.0 if s.size > 1 else 1.0
    s[0] = np.inf  # input
    out = np.empty(graph.n_edges)
    for e in graph.edges:
        a = s[e.forward]
        b = np.inf if e.dst == "logits" else s[graph.forward_index(e.dst)]
        v = a if abs(a) <= abs(b) else b
        out[e.index] = top if not np.isfinite(v) else v
    return out


def mlp_input_gradients(graph, rt, grads: torch.Tensor) -> torch.Tensor:
    """MIB's NAP gradients ``[F, ...]`` from destination-input gradients ``grads [K, ...]``: a
    node's output gradient, except an MLP's, which is the gradient at its input."""
    g = rt.node_gradients(grads)
    for f, name in enumerate(graph.forward_nodes):
        if name.startswith("m"):
            g[f] = grads[graph.backward_index(name)]
    return g


def _finish(ctx, name, params, neurons: torch.Tensor, granularity, t0):
    neurons = -neurons.detach().double().cpu().numpy()  # loss increase convention
    g = ctx.graph
    nodes = node_scores_of(neurons, granularity)
    scores = edge_scores_from_nodes(g, nodes)
    node_scores = {n: float(nodes[i]) for i, n in enumerate(g.forward_nodes)}
    extra = {"neuron_scores": neurons.tolist(), "granularity": granularity}
    if params.get("protocol") == "mib":
        extra["protocol"] = ("mib: MIB's code (MLP gradient at hook_mlp_in" + (", NAP-IG-inputs" if name == "nap-ig" else "")
                             + "); the paper takes the gradient at the node's output")
    return finish(ctx, name, params, scores, None, t0, node_scores=node_scores, extra=extra)


def run(ctx: Context, batch_size: int, granularity: str = "neuron", ablation: str = "resample", top_n=None,
        rel_threshold=0.05, protocol: str = "cbench", **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    N = ctx.data.n_examples
    neurons = torch.zeros(rt.n_forward, rt.d_model, dtype=rt.dtype, device=rt.device)
    per = min(batch_size, rows_per_pass(rt, rt.tokens_tensor(ctx.data.base[:1]).shape[1]))  # bounded memory
    chunks = row_parts(N, per)
    bar = progress_bar(len(chunks), "nap", ctx.progress)
    for s, e in chunks:
        abl = ctx.ablated if ctx.ablated.shape[1] == 1 else ctx.ablated[:, s:e]
        grads, clean_acts = clean_point_gradients(ctx, s, e, abl)
        if protocol == "mib":
            g = mlp_input_gradients(ctx.graph, rt, grads)
            neurons += ((clean_acts - abl).expand(-1, *g.shape[1:]) * g).sum((1, 2)) * ((e - s) / N)
        else:
            neurons += rt.neuron_scores_from_input_gradients(clean_acts - abl, grads) * ((e - s) / N)
        bar.update(1)
    bar.close()
    params = {"batch_size": batch_size, "granularity": granularity, "ablation": ablation, "top_n": top_n,
              "rel_threshold": rel_threshold, "protocol": None if protocol == "cbench" else protocol}
    return _finish(ctx, "nap", params, neurons, granularity, t0)


def run_ig(ctx: Context, steps: int, batch_rows: int, granularity: str = "neuron", ablation: str = "resample",
           top_n=None, rel_threshold=0.05, protocol: str = "cbench", **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    N = ctx.data.n_examples
    neurons = torch.zeros(rt.n_forward, rt.d_model, dtype=rt.dtype, device=rt.device)
    if protocol == "mib":  # NAP-IG-inputs: every node scored from the input-interpolation runs
        for _grp, s, e, grads, diff in collect_gradients(ctx, steps, batch_rows, "inputs", first=1):
            g = mlp_input_gradients(ctx.graph, rt, grads[:, 0])
            neurons += (diff * g).sum((1, 2)) * ((e - s) / N)
    for grp, s, e, grads, diff in (() if protocol == "mib" else
                                   collect_gradients(ctx, steps, batch_rows, "activations")):
        for gi, members in enumerate(grp):
            node_grads = rt.node_gradients(grads[:, gi])[members]  # [k, n, P, D]
            neurons[members] += (diff[members] * node_grads).sum((1, 2)) * ((e - s) / N)
    params = {"steps": steps, "batch_rows": batch_rows, "granularity": granularity, "ablation": ablation,
              "top_n": top_n, "rel_threshold": rel_threshold, "protocol": None if protocol == "cbench" else protocol}
    return _finish(ctx, "nap-ig", params, neurons, granularity, t0)
