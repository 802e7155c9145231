"""MIB's neuron-level NAP circuits and neuron ablation (`--protocol mib`, docs/mib-parity.md
divergence 9) against a reimplementation of the reference code written here from EAP-IG (branch
MIB, 7af394a): `Graph.apply_topn(n, absolute, level='neuron', prune=True)` with its in_graph
matrix over (forward node x backward slot, non-real slots included) and `Graph.prune`, and
`evaluate_graph`'s hooks (corrupted minus actual output at hook_embed / attn.hook_result /
hook_mlp_out, added into each destination's input hook masked by the neurons not in the graph
and by the edges whose source is not fully in it), on a small random model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cbench.artifacts import transformer_lens_adapter as tla
from cbench.discovery import discover, to_edge_scores_document
from cbench.errors import UsageError
from cbench.graph.graph import Graph
from cbench.runtime import CircuitRuntime
from cbench.scoring.faithfulness import SIZE_GRID, task_metric
from cbench.scoring.mib_neurons import (
    document_faithfulness,
    evaluate_neuron_faithfulness,
    neuron_circuits_at_sizes,
    neuron_faithfulness_of_circuits,
    neuron_scores_of,
)
from cbench.tasks.data import TaskData
from circuit_models import random_model, random_tokens


class _Case:
    def __init__(self, rt):
        self.runtime, self.graph, self.task_type = rt, rt.graph, "categorical"


@pytest.fixture(scope="module")
def setup():
    model = random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=13, weight_scale=2.0)
    tla.enable_edge_hooks(model)
    n, p = 8, 5
    base, source = random_tokens(n, p, 9, seed=51), random_tokens(n, p, 9, seed=52)
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    rt = CircuitRuntime(model)
    return model, rt, _Case(rt), TaskData(base, source, None, valid, "categorical")


# ------------------------------------------------------------------- the reference, from the code
def mib_topn_neurons(neuron_scores: torch.Tensor, n: int, absolute: bool) -> torch.Tensor:
    """apply_topn(level='neuron'): the n best neurons (torch.argsort, descending) of the flattened scores."""
    s = neuron_scores.clone().float()
    if absolute:
        s = s.abs()
    order = torch.argsort(s.view(-1), descending=True)
    keep = torch.zeros(s.numel(), dtype=torch.bool)
    keep[order[:n]] = True
    return keep.view(s.shape)


def mib_graph_matrices(g: Graph, neurons_in_graph: torch.Tensor):
    """(nodes_in_graph, in_graph [F, n_backward], neurons_in_graph) after apply_topn's reset/add
    and Graph.prune, as the reference computes them."""
    F, K = len(g.forward_nodes), len(g.backward_slots)
    f2b = torch.zeros(F, K)  # forward_to_backward: a node's own input slots
    for k, (node, _qkv) in enumerate(g.backward_slots):
        if node != "logits":
            f2b[g.forward_nodes.index(node), k] = 1
    nodes = neurons_in_graph.any(1).clone()
    in_graph = nodes.view(-1, 1).expand(F, K).clone()  # every slot, non-real ones included
    nodes &= neurons_in_graph.any(1)  # prune: neuronless nodes out
    while True:
        outgoing = in_graph.any(1)
        ingoing = (in_graph.any(0).float() @ f2b.T) > 0
        ingoing[0] = True
        new = outgoing & ingoing
        same = bool(torch.all(new == nodes))
        nodes = new
        bwd = nodes.float() @ f2b
        bwd[-1] = 1
        in_graph &= (nodes.float()[:, None] * bwd[None, :]) > 0
        if same:
            break
    return nodes, in_graph, neurons_in_graph & nodes[:, None]


def mib_evaluate_neurons(model, g: Graph, neurons_in_graph: torch.Tensor, base, source) -> torch.Tensor:
    """evaluate_graph with neurons_in_graph, intervention 'patching': logits [B, P, V]."""
    nodes, in_graph, neurons = mib_graph_matrices(g, neurons_in_graph)
    D = model.cfg.d_model
    fully = (neurons.float().sum(-1) == D).float()
    edge_corrupt = 1 - in_graph.float() * fully[:, None]
    neuron_corrupt = 1 - neurons.float()
    F = len(g.forward_nodes)
    B, P = base.shape
    diff = torch.zeros(B, P, F, D)
    out_hooks = [("hook_embed", 0, None)]
    for layer in range(g.n_layers):
        for h in range(g.n_heads):
            out_hooks.append((f"blocks.{layer}.attn.hook_result", g.forward_nodes.index(f"a{layer}.h{h}"), h))
        out_hooks.append((f"blocks.{layer}.hook_mlp_out", g.forward_nodes.index(f"m{layer}"), None))

    def recorder(sign):
        def hook(x, hook):
            for name, f, h in out_hooks:
                if name == hook.name:
                    diff[:, :, f] += sign * (x if h is None else x[:, :, h])
            return x
        return hook

    names = sorted({n for n, _, _ in out_hooks})
    with torch.no_grad():
        model.run_with_hooks(source, fwd_hooks=[(n, recorder(1.0)) for n in names])

    def prev_index(node: str) -> int:  # forward nodes strictly before the node's layer part
        n = g.node(node)
        if n.kind == "logits":
            return F
        first = 1 + n.layer * (g.n_heads + 1)
        return first if n.kind == "head" else first + g.n_heads

    def construct(slots):
        def hook(x, hook):
            for k, col in slots:
                node = g.backward_slots[col][0]
                pi = prev_index(node)
                upd = torch.einsum("bpfd,fd,f->bpd", diff[:, :, :pi], neuron_corrupt[:pi], edge_corrupt[:pi, col])
                if k is None:
                    x = x + upd
                else:
                    x[:, :, k] = x[:, :, k] + upd
            return x
        return hook

    build = []
    for layer in range(g.n_layers):
        if any(nodes[g.forward_nodes.index(f"a{layer}.h{h}")] for h in range(g.n_heads)):
            for letter in "qkv":
                slots = [(h, g.backward_slots.index((f"a{layer}.h{h}", letter))) for h in range(g.n_heads)]
                build.append((f"blocks.{layer}.hook_{letter}_input", construct(slots)))
        if nodes[g.forward_nodes.index(f"m{layer}")]:
            build.append((f"blocks.{layer}.hook_mlp_in", construct([(None, g.backward_slots.index((f"m{layer}", None)))])))
    build.append((tla.final_resid_hook(g.n_layers), construct([(None, len(g.backward_slots) - 1)])))
    with torch.no_grad():
        return model.run_with_hooks(base, fwd_hooks=[(n, recorder(-1.0)) for n in names] + build)


# ------------------------------------------------------------------------------------- the tests
def test_neuron_circuits_are_the_reference_top_n(setup):
    _model, rt, _case, _data = setup
    scores = np.random.default_rng(0).normal(size=(rt.n_forward, rt.d_model))
    for absolute in (False, True):
        masks = neuron_circuits_at_sizes(scores, SIZE_GRID, absolute)
        n_items = scores.size
        for k, m in zip(SIZE_GRID, masks):
            ref = mib_topn_neurons(torch.as_tensor(scores), int(k * n_items), absolute).numpy()
            assert (m == ref).all() and m.sum() == int(k * n_items)


def test_neuron_ablation_equals_the_reference_evaluate_graph(setup):
    model, rt, case, data = setup
    g = rt.graph
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(rt.n_forward, rt.d_model))
    masks = neuron_circuits_at_sizes(scores, SIZE_GRID, absolute=True)
    # partial nodes, whole nodes, empty nodes: a hand-made circuit as well as the grid's
    special = np.zeros((rt.n_forward, rt.d_model), bool)
    special[g.forward_nodes.index("a0.h1")] = True
    special[g.forward_nodes.index("m1"), :5] = True
    special[0, ::2] = True
    grid = tuple(SIZE_GRID) + (0.75,)
    masks = np.concatenate([masks, special[None]])
    metric, _ = task_metric(case, data, "kl")
    curve = neuron_faithfulness_of_circuits(case, data, masks, grid, metric="kl")
    refs = [mib_evaluate_neurons(model, g, torch.as_tensor(m), data.base, data.source) for m in masks]
    want = [-float(metric(r[None])[0]) for r in refs]
    assert max(abs(w) for w in want) > 1e-3
    assert np.allclose(curve.m_circuits, want, rtol=1e-4, atol=1e-6), np.abs(np.array(curve.m_circuits) - want).max()
    # the two ends: nothing kept is the corrupted run, everything kept the model
    with torch.no_grad():
        assert curve.m_empty == pytest.approx(-float(metric(model(data.source)[None])[0]), rel=1e-4, abs=1e-6)
    assert curve.m_full == pytest.approx(0.0, abs=1e-6)  # KL of the model to itself
    assert curve.n_edges == tuple(int(m.sum()) for m in masks)  # sizes counted in neurons


def test_nap_under_mib_writes_neuron_scores_and_is_evaluated_at_the_neuron_level(setup):
    _model, rt, case, data = setup
    res = discover(rt, data, "nap", {"protocol": "mib"}, progress=False)
    doc = to_edge_scores_document(res, case="toy", d_model=rt.d_model)
    json.dumps(doc, allow_nan=False)
    neurons = neuron_scores_of(rt.graph, doc, rt.d_model)
    assert np.allclose(neurons, np.array(res.extra["neuron_scores"]))
    assert "neurons_scores" not in doc["nodes"]["logits"]
    faith, level = document_faithfulness(case, data, doc, protocol="mib", metric="kl")
    assert level == "neuron"
    direct = evaluate_neuron_faithfulness(case, data, neurons, metric="kl")
    assert faith.cpr == pytest.approx(direct.cpr) and faith.cmd == pytest.approx(direct.cmd)
    assert faith.cpr_curve.n_edges[-1] == rt.n_forward * rt.d_model
    # the same document under the default protocol: edges; a paper-protocol NAP document carries no neurons
    assert document_faithfulness(case, data, doc, protocol="cbench", metric="kl")[1] == "edge"
    plain = to_edge_scores_document(discover(rt, data, "nap", {}, progress=False), case="toy", d_model=rt.d_model)
    assert neuron_scores_of(rt.graph, plain) is None
    # broken neuron scores: one clear error
    bad = json.loads(json.dumps(doc))
    del bad["nodes"]["m0"]["neurons_scores"]
    with pytest.raises(UsageError, match="not for m0"):
        neuron_scores_of(rt.graph, bad, rt.d_model)
    bad = json.loads(json.dumps(doc))
    bad["nodes"]["m0"]["neurons_scores"] = [0.0]
    with pytest.raises(UsageError, match="lists of d_model"):
        neuron_scores_of(rt.graph, bad, rt.d_model)
