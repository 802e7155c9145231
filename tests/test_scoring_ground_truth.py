"""cbench.scoring.ground_truth: promotion, edge/node AUROC, precision/recall, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cbench.errors import SchemaError, UsageError
from cbench.graph.graph import Graph
from cbench.scoring import ground_truth as gt

# 1 layer x 2 heads, attention only: 9 q/k/v-level edges, 5 head-level edges
SCORES = {
    "input->a0.h0<q>": -0.9, "input->a0.h0<k>": 0.1, "input->a0.h0<v>": 0.2,
    "input->a0.h1<q>": 0.3, "input->a0.h1<k>": 0.3, "input->a0.h1<v>": -0.3,
    "input->logits": 0.5, "a0.h0->logits": 0.3, "a0.h1->logits": 0.05,
}
TRUTH = ["input->a0.h0<v>", "a0.h0->logits"]


def _doc(graph, scores=SCORES, in_graph=(), nodes_in=None, case="3"):
    doc = {
        "schema": "cbench/edge-scores/v1", "case": case,
        "model": {"repo": "cbench/tracr-case-3", "revision": "v1.0.0", "kind": "tracr"},
        "method": {"name": "hand", "hyperparameters": {}}, "data": {"split": "validation", "n_examples": 1},
        "runtime_s": 0.0,
        "cfg": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "parallel_attn_mlp": False, "d_model": 8},
        "nodes": {n: {"in_graph": n in (nodes_in or ())} for n in graph.node_names},
        "edges": {n: {"score": s, "in_graph": n in in_graph} for n, s in scores.items()},
    }
    return doc


@pytest.fixture(scope="module")
def graph():
    g = Graph(1, 2, has_mlp=False)
    assert set(g.edge_names) == set(SCORES)
    return g


def test_promotion_takes_max_abs_over_qkv(graph):
    head = gt.head_level_scores(graph, np.array([SCORES[n] for n in graph.edge_names]))
    by_name = dict(zip(graph.head_edge_names, head))
    assert by_name["input->a0.h0"] == pytest.approx(0.9)  # |-0.9| beats 0.1 and 0.2
    assert by_name["input->a0.h1"] == pytest.approx(0.3)
    assert by_name["input->logits"] == pytest.approx(0.5)
    signed = dict(zip(graph.head_edge_names, gt.head_level_scores(graph, np.array([SCORES[n] for n in graph.edge_names]),
                                                                   signed=True)))
    assert signed["input->a0.h0"] == pytest.approx(0.2)
    assert gt.truth_head_edges(graph, TRUTH) == {"input->a0.h0", "a0.h0->logits"}


def test_edge_and_node_auroc_hand_computed(graph):
    # q/k/v level (the default): positives {0.2, 0.3}, negatives |.| {0.9, 0.1, 0.3, 0.3, 0.3, 0.5, 0.05}:
    # 0.2 beats 2; 0.3 beats 2 and ties 3 -> (2 + 3.5) / 14
    res = gt.score_against_truth(graph, _doc(graph), TRUTH)
    assert res.granularity == "qkv" and res.edge_auroc == pytest.approx(5.5 / 14)
    assert (res.n_edges, res.n_true_edges) == (9, 2)
    # promoted (InterpBench): positives {0.9, 0.3}, negatives {0.3, 0.5, 0.05}: (3 + 0.5 + 1) / 6 = 0.75
    assert res.edge_auroc_promoted == pytest.approx(0.75)
    # nodes: a0.h0 (in truth) max(0.9, 0.3) = 0.9; a0.h1 max(0.3, 0.05) = 0.3 -> 1.0
    assert res.node_auroc == pytest.approx(1.0)
    assert (res.n_head_edges, res.n_true_head_edges, res.n_nodes, res.n_true_nodes) == (5, 2, 2, 1)
    # signed, promoted: positives {0.2, 0.3}, negatives {0.3, 0.5, 0.05}: (1 + 1.5) / 6
    signed = gt.score_against_truth(graph, _doc(graph), TRUTH, signed=True)
    assert signed.edge_auroc_promoted == pytest.approx(2.5 / 6)
    # signed, q/k/v: 0.2 beats {-0.9, 0.1, -0.3, 0.05}; 0.3 beats those and ties two 0.3 -> 9 / 14
    assert signed.edge_auroc == pytest.approx(9 / 14)


def test_ties_are_one_threshold(graph):
    flat = {n: 1.0 for n in SCORES}
    res = gt.score_against_truth(graph, _doc(graph, flat), TRUTH)
    assert res.edge_auroc == pytest.approx(0.5)
    assert list(res.edge_roc.fpr) == [0.0, 1.0] and list(res.edge_roc.tpr) == [0.0, 1.0]


def test_node_level_method_scores_are_used_as_given(graph):
    doc = _doc(graph)
    doc["nodes"]["a0.h0"]["score"] = 0.1
    doc["nodes"]["a0.h1"]["score"] = 0.7
    res = gt.score_against_truth(graph, doc, TRUTH)
    assert res.node_scores_source == "given"
    assert res.node_auroc == pytest.approx(0.0)


def test_precision_recall_at_in_graph(graph):
    doc = _doc(graph, in_graph=("input->a0.h0<q>", "input->logits"), nodes_in=("a0.h0",))
    res = gt.score_against_truth(graph, doc, TRUTH)
    # q/k/v: predicted {input->a0.h0<q>, input->logits} vs truth {input->a0.h0<v>, a0.h0->logits}
    assert (res.edge_pr.tp, res.edge_pr.fp, res.edge_pr.fn) == (0, 2, 2)
    # promoted: predicted head edges {input->a0.h0, input->logits} vs truth {input->a0.h0, a0.h0->logits}
    pp = res.promoted_pr
    assert (pp.tp, pp.fp, pp.fn) == (1, 1, 1)
    assert pp.precision == pytest.approx(0.5) and pp.recall == pytest.approx(0.5)
    assert res.node_pr.precision == 1.0 and res.node_pr.recall == 1.0
    d = res.to_dict()
    assert d["edge_auroc"] == pytest.approx(5.5 / 14) and d["edge_auroc_promoted"] == pytest.approx(0.75)
    assert d["granularity"] == "qkv" and "edge_roc" in d and "edge_roc_promoted" in d
    empty = gt.score_against_truth(graph, _doc(graph), TRUTH).to_dict()
    assert empty["edge_precision_recall"]["precision"] is None  # nothing predicted: no NaN in JSON


def test_head_granularity_truth(graph):
    res = gt.score_against_truth(graph, _doc(graph), ["input->a0.h0", "a0.h0->logits"])
    assert res.granularity == "head" and res.edge_auroc == pytest.approx(0.75)


def test_no_signal_edges_are_left_out_unless_included(graph):
    truth = ["input->a0.h0<q>", "input->a0.h0<v>", "a0.h0->logits"]
    # input->a0.h0<q> (-0.9) would rank first; marked, it is neither positive nor negative
    res = gt.score_against_truth(graph, _doc(graph), truth, no_signal=["input->a0.h0<q>"])
    assert (res.n_edges, res.n_true_edges) == (8, 2) and res.no_signal_edges == ("input->a0.h0<q>",)
    # the rest is the hand-computed case without that negative: 0.2 beats 2 of 6, 0.3 beats 2, ties 3
    assert res.edge_auroc == pytest.approx(5.5 / 12)
    both = gt.score_against_truth(graph, _doc(graph), truth, no_signal=["input->a0.h0<q>"], include_no_signal=True)
    assert both.n_true_edges == 3 and both.no_signal_included
    assert both.edge_auroc == pytest.approx((6 + 5.5) / 18)  # 0.9 beats all 6 negatives
    # promoted: input->a0.h0 still has a signal-carrying truth edge (<v>), so it stays a positive
    assert res.n_true_head_edges == 2
    only_q = gt.score_against_truth(graph, _doc(graph), ["input->a0.h0<q>", "a0.h0->logits"],
                                    no_signal=["input->a0.h0<q>"])
    assert only_q.n_true_head_edges == 1 and only_q.n_true_edges == 1
    # marks on edges outside the ground truth mean nothing
    assert gt.score_against_truth(graph, _doc(graph), TRUTH, no_signal=["input->logits"]).n_edges == 9
    with pytest.raises(UsageError, match="include-no-signal"):
        gt.score_against_truth(graph, _doc(graph), ["input->a0.h0<q>"], no_signal=["input->a0.h0<q>"])


def test_check_edge_scores_bad_input(graph):
    gt.check_edge_scores(_doc(graph), graph, case="3", d_model=8)
    with pytest.raises(UsageError, match="for case '33', not case '3'"):
        gt.check_edge_scores(_doc(graph, case="33"), graph, case="3")
    bad = _doc(graph)
    bad["edges"]["input->a0.h0<q>"]["score"] = math.inf
    with pytest.raises(UsageError, match="finite"):
        gt.check_edge_scores(bad, graph, case="3")
    unknown = _doc(graph)
    unknown["edges"]["a5.h0->logits"] = {"score": 1.0, "in_graph": False}
    with pytest.raises(SchemaError, match="a5.h0->logits"):
        gt.check_edge_scores(unknown, graph, case="3")
    missing = _doc(graph)
    del missing["edges"]["input->logits"]
    with pytest.raises(SchemaError, match="no score"):
        gt.check_edge_scores(missing, graph, case="3")
    other_shape = Graph(2, 2, has_mlp=False)
    with pytest.raises(SchemaError):
        gt.check_edge_scores(_doc(graph), other_shape, case="3")


def test_empty_or_full_truth_refused(graph):
    with pytest.raises(UsageError, match="empty"):
        gt.score_against_truth(graph, _doc(graph), [])
    with pytest.raises(UsageError, match="every edge"):
        gt.score_against_truth(graph, _doc(graph), list(SCORES))


def test_mask_logit_methods_rank_by_sign(graph):
    # sp/edge-sp scores are mask logits: -6 means "pruned", not "important"
    doc = _doc(graph)
    doc["method"]["name"] = "sp"
    assert gt.signed_ranking(doc)
    assert gt.score_against_truth(graph, doc, TRUTH).edge_auroc_promoted == pytest.approx(2.5 / 6)
    assert gt.score_against_truth(graph, doc, TRUTH).edge_auroc == pytest.approx(9 / 14)
    assert gt.score_against_truth(graph, doc, TRUTH, signed=False).edge_auroc_promoted == pytest.approx(0.75)
    doc["method"] = {"name": "mine", "hyperparameters": {}, "score_kind": "signed"}
    assert gt.signed_ranking(doc)
    doc["nodes"]["a0.h0"]["score"] = -6.0  # pruned node
    doc["nodes"]["a0.h1"]["score"] = 5.0
    assert gt.score_against_truth(graph, doc, TRUTH).node_auroc == pytest.approx(0.0)
