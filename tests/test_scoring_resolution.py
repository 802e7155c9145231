"""Issue 45: a score below the numerical resolution of its computation is no detection -- it ties
with zero -- and the ground-truth edges only such scores lifted are counted."""

from __future__ import annotations

import numpy as np
import pytest

from cbench.graph.graph import Graph
from cbench.scoring.ground_truth import score_against_truth
from cbench.scoring.resolution import RESOLUTION_FACTOR, floor_scores, resolution_of, score_dtype
from cbench.scoring.statistics import auroc_mann_whitney
from cbench.scoring.stress_tier import class_aurocs, class_sub_resolution

GRAPH = Graph(n_layers=2, n_heads=2)


def _doc(scores: dict, method: str = "eap", dtype: str | None = None) -> dict:
    m = {"name": method, "hyperparameters": {}}
    if dtype:
        m["details"] = {"dtype": dtype}
    return {"edges": {n: {"score": float(s), "in_graph": False} for n, s in scores.items()}, "method": m}


def _planted():
    """Two ground-truth edges with real scores, two scored 1e-12 (rounding residue), the rest of
    the graph exactly 0 but for two outside edges with real scores below the real truth."""
    names = GRAPH.edge_names
    truth = [names[0], names[1], names[2], names[3]]
    scores = {n: 0.0 for n in names}
    scores[names[0]], scores[names[1]] = 0.9, 0.5  # found
    scores[names[2]], scores[names[3]] = 1e-12, -3e-12  # residue
    scores[names[10]], scores[names[11]] = 0.02, 0.01  # outside, real but small
    return truth, scores


def test_resolution_rule_is_factor_eps_max():
    v = np.array([0.0, 1e-12, -0.5, 2.0])
    assert resolution_of(v) == pytest.approx(RESOLUTION_FACTOR * np.finfo(np.float32).eps * 2.0)
    assert resolution_of(v, "float64") == pytest.approx(RESOLUTION_FACTOR * np.finfo(np.float64).eps * 2.0)
    assert resolution_of(v, "bfloat16") == pytest.approx(RESOLUTION_FACTOR * 2.0 ** -7 * 2.0)
    assert resolution_of(np.zeros(3)) == 0.0
    out, fl = floor_scores(v)
    assert out.tolist() == [0.0, 0.0, -0.5, 2.0] and fl.n_floored == 1 and fl.applied
    # the dtype comes from the document (details, then hyperparameters), float32 by default
    assert score_dtype(_doc({}, dtype="float64")) == "float64"
    assert score_dtype(_doc({}, dtype="torch.bfloat16")) == "bfloat16"
    assert score_dtype(_doc({}, dtype="int8")) == "float32"
    assert score_dtype({}) == "float32"


def test_a_planted_sub_resolution_score_ties_with_the_exact_zeros():
    truth, scores = _planted()
    raw = score_against_truth(GRAPH, _doc(scores), truth, floor=False)
    res = score_against_truth(GRAPH, _doc(scores), truth)
    n_out = GRAPH.n_edges - 4
    # raw: the two residue edges rank above every exact zero (n_out - 2 of them) and below the two real
    # outside edges: AUROC = (2 * n_out + 2 * (n_out - 2)) / (4 * n_out)
    assert raw.edge_auroc == pytest.approx((2 * n_out + 2 * (n_out - 2)) / (4 * n_out))
    # floored: they tie with the n_out - 2 exact zeros (half credit) and lose to the two real ones
    assert res.edge_auroc == pytest.approx((2 * n_out + 2 * 0.5 * (n_out - 2)) / (4 * n_out))
    labels = np.array([n in truth for n in GRAPH.edge_names])
    tied = np.array([0.0 if abs(s) < 1e-6 else abs(s) for s in scores.values()])
    assert res.edge_auroc == pytest.approx(auroc_mann_whitney(tied, labels))
    assert res.n_truth_sub_resolution == 2 and raw.n_truth_sub_resolution == 0
    assert res.floor.n_floored == 2 and res.to_dict(curves=False)["n_truth_sub_resolution"] == 2
    # in float64 the same 1e-12 is far above the resolution (64 x 2.2e-16 x 0.9 = 1.3e-14): it counts
    as64 = score_against_truth(GRAPH, _doc(scores, dtype="float64"), truth)
    assert as64.edge_auroc == pytest.approx(raw.edge_auroc) and as64.n_truth_sub_resolution == 0


def test_signed_mask_logits_get_no_floor():
    truth, scores = _planted()
    doc = _doc(scores, method="edge-sp")
    res = score_against_truth(GRAPH, doc, truth)
    assert res.signed and res.n_truth_sub_resolution == 0 and not res.floor.applied
    assert res.edge_auroc == score_against_truth(GRAPH, doc, truth, floor=False).edge_auroc


def test_stress_classes_tie_sub_resolution_scores_and_count_them():
    truth, scores = _planted()
    circuit = {"edges": truth, "edge_classes": {truth[0]: "primary", truth[1]: "primary",
                                                truth[2]: "backup", truth[3]: "backup"}}
    n_out = GRAPH.n_edges - 4
    raw = class_aurocs(GRAPH, _doc(scores), circuit, floor=False)
    per = class_aurocs(GRAPH, _doc(scores), circuit)
    assert raw["backup"] == pytest.approx((n_out - 2) / n_out)  # 0.94: "detected" by residue alone
    assert per["backup"] == pytest.approx(0.5 * (n_out - 2) / n_out)  # tied with the zeros, below the real two
    assert per["primary"] == raw["primary"] == 1.0
    assert class_sub_resolution(GRAPH, _doc(scores), circuit) == {"backup": 2, "primary": 0}


def test_random_per_class_auroc_is_the_mean_over_the_overall_draws():
    from cbench.scoring.random_baseline import RANDOM_SEEDS, random_class_aurocs, random_draws
    from cbench.scoring.statistics import auroc

    names = GRAPH.edge_names
    circuit = {"edges": names[:2], "edge_classes": {names[0]: "a", names[1]: "a"}}
    per = random_class_aurocs(GRAPH, circuit, seed=0)
    draws = np.abs(random_draws(GRAPH.n_edges, 0, RANDOM_SEEDS))
    labels = np.array([n in names[:2] for n in names])
    expect = np.mean([auroc(row, labels) for row in draws[:50]])
    # the mean over every draw is near 0.5 on a two-edge class, where one draw reads anywhere in [0, 1]
    assert per["a"] == pytest.approx(0.5, abs=0.01)
    assert abs(expect - 0.5) < 0.1
    single = [auroc(row, labels) for row in draws[:5]]
    assert max(abs(s - 0.5) for s in single) > abs(per["a"] - 0.5)
