"""The canonical graph: counts, order, hook-name converters, promotion, masks and matrices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cbench.errors import GraphError
from cbench.graph.graph import Graph, parse_edge_name, promote_edge_name


def test_gpt2_small_shape_counts():
    g = Graph(12, 12, has_mlp=True)
    assert g.n_nodes == 158  # input + 144 heads + 12 MLPs + logits
    assert g.n_edges == 32491
    assert g.n_forward == 157 and g.n_backward == 12 * (3 * 12 + 1) + 1
    assert int(g.real_edge_matrix.sum()) == 32491


def test_gpt2_small_from_config_dict():
    g = Graph.from_config({"n_layers": 12, "n_heads": 12, "d_model": 768, "attn_only": False})
    assert (g.n_nodes, g.n_edges) == (158, 32491)


def test_attention_only_counted_by_hand():
    # 2 layers x 2 heads, no MLPs. Heads of layer 0 read input (1 source x 3 inputs x 2 heads = 6);
    # heads of layer 1 read input and both layer-0 heads (3 x 3 x 2 = 18); logits read all 5.
    g = Graph(2, 2, has_mlp=False)
    assert g.node_names == ("input", "a0.h0", "a0.h1", "a1.h0", "a1.h1", "logits")
    assert g.n_edges == 6 + 18 + 5
    assert "a0.h0->m1" not in g.edge_names
    assert Graph.from_config({"n_layers": 2, "n_heads": 2, "attn_only": True}) == g


def test_parallel_attn_mlp_counted_by_hand():
    # 2 layers x 1 head with MLPs. Sequential: a0 3, m0 2 (input, a0.h0), a1 3x3 = 9,
    # m1 4 (input, a0.h0, m0, a1.h0), logits 5 -> 23. Parallel: an MLP does not read its own
    # layer's heads: m0 1, m1 3 -> 21.
    seq = Graph(2, 1, has_mlp=True)
    par = Graph(2, 1, has_mlp=True, parallel_attn_mlp=True)
    assert seq.n_edges == 3 + 2 + 9 + 4 + 5 == 23
    assert par.n_edges == 3 + 1 + 9 + 3 + 5 == 21
    assert "a1.h0->m1" in seq.edge_names and "a1.h0->m1" not in par.edge_names
    assert "a0.h0->m1" in par.edge_names
    assert set(par.edge_names) < set(seq.edge_names)


def test_source_blocks_are_the_staircase_of_the_edge_matrix():
    # 2 layers x 1 head with MLPs: q/k/v of a0 read input (1 source), m0 reads input and a0.h0 (2),
    # a1's q/k/v read 3, m1 reads 4, logits 5
    assert Graph(2, 1, has_mlp=True).source_blocks == ((1, 0, 3), (2, 3, 4), (3, 4, 7), (4, 7, 8), (5, 8, 9))
    for g in (Graph(12, 12, has_mlp=True), Graph(3, 2, has_mlp=False), Graph(2, 2, parallel_attn_mlp=True)):
        rebuilt = np.zeros_like(g.real_edge_matrix)
        for n, first, stop in g.source_blocks:
            rebuilt[:n, first:stop] = True
        assert np.array_equal(rebuilt, g.real_edge_matrix)
        assert sum(n * (stop - first) for n, first, stop in g.source_blocks) == g.n_edges


def test_node_order_and_indices_are_stable_and_topological():
    g = Graph(3, 2, has_mlp=True)
    again = Graph(3, 2, has_mlp=True)
    assert g.edge_names == again.edge_names and g.node_names == again.node_names
    assert g.node_names[0] == "input" and g.node_names[-1] == "logits"
    assert g.node_names[1:4] == ("a0.h0", "a0.h1", "m0")
    for i, e in enumerate(g.edges):
        assert e.index == i and g.edge_index(e.name) == i
        assert g.node(e.src).index < g.node(e.dst).index  # sources come before destinations
    dst_order = [g.node(e.dst).index for e in g.edges]
    assert dst_order == sorted(dst_order)  # grouped by destination in forward order
    # within a head: all q edges, then k, then v
    into = [e.qkv for e in g.edges if e.dst == "a1.h0"]
    assert into == ["q"] * 4 + ["k"] * 4 + ["v"] * 4


def test_edge_names_parse_and_promote():
    assert parse_edge_name("a0.h1->a1.h0<v>") == ("a0.h1", "a1.h0", "v")
    assert parse_edge_name("m1->logits") == ("m1", "logits", None)
    assert promote_edge_name("input->a1.h0<q>") == "input->a1.h0"
    with pytest.raises(GraphError):
        parse_edge_name("a0.h1 to m1")


def test_hook_edges_round_trip_on_every_edge():
    for g in (Graph(2, 3, has_mlp=True), Graph(3, 2, has_mlp=False), Graph(2, 2, parallel_attn_mlp=True)):
        for e in g.edges:
            parent, child = g.to_hook_edge(e.name)
            assert g.from_hook_edge(parent, child) == e.name


def test_hook_edges_interpbench_vocabulary():
    g = Graph(2, 4, has_mlp=True)
    assert g.from_hook_edge("blocks.0.hook_mlp_out", "blocks.1.hook_q_input[2]") == "m0->a1.h2<q>"
    assert g.from_hook_edge("blocks.0.attn.hook_result[:, :, 3]", "blocks.1.hook_v_input[:, :, 1]") == "a0.h3->a1.h1<v>"
    assert g.from_hook_edge("blocks.1.attn.hook_result[COL, COL, 2]", "blocks.1.hook_resid_post") == "a1.h2->logits"
    assert g.from_hook_edge("hook_embed", "blocks.0.hook_mlp_in") == "input->m0"
    assert g.from_hook_edge("blocks.0.hook_resid_pre", "blocks.0.hook_k_input[0]") == "input->a0.h0<k>"
    assert g.from_hook_edge("blocks.0.attn.hook_result[1]", "blocks.0.hook_mlp_in") == "a0.h1->m0"
    assert g.to_hook_edge("a0.h3->a1.h1<v>") == ("blocks.0.attn.hook_result[3]", "blocks.1.hook_v_input[1]")
    assert g.to_hook_edge("m1->logits") == ("blocks.1.hook_mlp_out", "blocks.1.hook_resid_post")


def test_hook_edges_internal_to_a_head_are_none():
    g = Graph(2, 4, has_mlp=True)
    assert g.from_hook_edge("blocks.1.hook_q_input[2]", "blocks.1.attn.hook_q[2]") is None
    assert g.from_hook_edge("blocks.1.attn.hook_k[:, :, 2]", "blocks.1.attn.hook_result[:, :, 2]") is None


@pytest.mark.parametrize("parent,child", [
    ("blocks.0.hook_mlp_out", "blocks.0.hook_q_input[0]"),  # backwards in time
    ("blocks.0.hook_mlp_out", "blocks.5.hook_q_input[0]"),  # no layer 5
    ("blocks.0.attn.hook_result[9]", "blocks.1.hook_mlp_in"),  # no head 9
    ("blocks.0.hook_nonsense", "blocks.1.hook_mlp_in"),
    ("blocks.1.hook_mlp_in", "blocks.0.hook_mlp_out"),  # parent is an input hook
    ("blocks.0.hook_mlp_out", "blocks.0.hook_resid_post"),  # not the last layer's resid_post
])
def test_bad_hook_edges_raise_graph_error(parent, child):
    with pytest.raises(GraphError):
        Graph(2, 4, has_mlp=True).from_hook_edge(parent, child)


def test_promote_and_promote_scores():
    g = Graph(2, 1, has_mlp=True)
    assert g.promote(["input->a1.h0<q>", "input->a1.h0<v>", "m0->a1.h0<v>", "a1.h0->logits"]) == {
        "input->a1.h0", "m0->a1.h0", "a1.h0->logits"}
    with pytest.raises(GraphError, match="not in this model's graph"):
        g.promote(["a5.h0->logits"])
    assert len(g.head_edge_names) == 23 - 2 * 4  # each head's 3 inputs collapse to 1
    scores = np.zeros(g.n_edges)
    scores[g.edge_index("input->a1.h0<q>")] = 0.2
    scores[g.edge_index("input->a1.h0<k>")] = -0.5
    scores[g.edge_index("input->a1.h0<v>")] = 0.1
    assert g.promote_scores(scores)["input->a1.h0"] == -0.5
    assert g.promote_scores(scores, reduce="max")["input->a1.h0"] == 0.2
    assert g.promote_scores(scores, reduce="sum")["input->a1.h0"] == pytest.approx(-0.2)


def test_masks_and_nodes_of():
    g = Graph(2, 1, has_mlp=True)
    circuit = ["input->m0", "m0->a1.h0<v>", "a1.h0->logits"]
    mask = g.mask(circuit)
    assert mask.dtype == bool and mask.sum() == 3
    assert g.edges_of_mask(mask) == circuit  # graph order
    assert g.nodes_of(circuit) == {"input", "m0", "a1.h0", "logits"}
    with pytest.raises(GraphError, match="23 entries"):
        g.edges_of_mask(np.ones(5, dtype=bool))
    with pytest.raises(GraphError, match="did you mean"):
        g.mask(["input->m9"])


def test_node_mask_to_edge_mask():
    g = Graph(2, 1, has_mlp=True)
    m = g.node_mask_to_edge_mask(["m0", "a1.h0"])
    kept = set(g.edges_of_mask(m))
    assert kept == {"input->m0", "input->a1.h0<q>", "input->a1.h0<k>", "input->a1.h0<v>",
                    "m0->a1.h0<q>", "m0->a1.h0<k>", "m0->a1.h0<v>", "input->logits", "m0->logits", "a1.h0->logits"}
    assert set(g.edges_of_mask(g.node_mask_to_edge_mask([]))) == {"input->logits"}
    with pytest.raises(GraphError):
        g.node_mask_to_edge_mask(["m7"])


def test_to_matrix_from_matrix_numpy_and_torch():
    g = Graph(2, 2, has_mlp=True)
    values = np.arange(1, g.n_edges + 1, dtype=np.float32)
    mat = g.to_matrix(values)
    assert mat.shape == (g.n_forward, g.n_backward)
    assert np.array_equal(g.from_matrix(mat), values)
    assert mat.sum() == values.sum()  # non-edges hold the fill value 0
    e = g.edge("a0.h1->a1.h0<k>")
    assert mat[g.forward_index("a0.h1"), g.backward_index("a1.h0", "k")] == values[e.index]
    batch = torch.rand(3, g.n_edges)
    tm = g.to_matrix(batch, fill=-1.0)
    assert tm.shape == (3, g.n_forward, g.n_backward)
    assert torch.equal(g.from_matrix(tm), batch)
    assert (tm[:, ~torch.as_tensor(g.real_edge_matrix)] == -1).all()


def test_bad_shapes_and_configs():
    with pytest.raises(GraphError):
        Graph(0, 1)
    with pytest.raises(GraphError):
        Graph.from_config({"n_heads": 2})
    with pytest.raises(GraphError):
        Graph.from_config({"n_layers": "two", "n_heads": 2})
    with pytest.raises(GraphError):
        Graph(2, 1).node("a0.h7")


def test_prune_dangling_keeps_only_input_to_logits_paths():
    # issue 14 (in_graph kept edges into nodes with no path to the logits, as EAP's circuit of case 3 did)
    g = Graph(2, 1)
    kept = ["input->a0.h0<v>", "a0.h0->logits"]
    dangling = ["input->m0",            # m0 reaches nothing
                "a0.h0->a1.h0<q>",      # a1.h0 has no edge out
                "a1.h0->m1"]            # and m1 none either
    mask = g.mask(kept + dangling)
    assert g.edges_of_mask(g.prune_dangling(mask)) == sorted(kept, key=g.edge_index)
    # an edge out of a node input cannot reach goes too
    mask = g.mask(kept + ["a1.h0->logits"])
    assert g.edges_of_mask(g.prune_dangling(mask)) == sorted(kept, key=g.edge_index)
    # a connected circuit is its own fixpoint
    full = g.mask(kept + ["input->m0", "m0->logits"])
    assert (g.prune_dangling(full) == full).all()
    assert (g.prune_dangling(g.prune_dangling(mask)) == g.prune_dangling(mask)).all()


def test_prune_dangling_keeps_what_the_name_sweeps_keep():
    """Over many random masks, the index sweeps keep exactly the edges on an input -> logits path
    (the set-of-names sweeps they replace, written out here)."""
    import numpy as np

    from cbench.graph.graph import Graph

    g = Graph(3, 2, has_mlp=True)
    rng = np.random.default_rng(0)
    for _ in range(500):
        m = rng.random(g.n_edges) < rng.random()
        reached, leads = {"input"}, {"logits"}
        for e, k in zip(g.edges, m):
            if k and e.src in reached:
                reached.add(e.dst)
        for e, k in zip(reversed(g.edges), m[::-1]):
            if k and e.dst in leads:
                leads.add(e.src)
        ref = np.array([bool(k and e.src in reached and e.dst in leads) for e, k in zip(g.edges, m)])
        assert np.array_equal(g.prune_dangling(m), ref)
