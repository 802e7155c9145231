"""cbench.scoring.faithfulness on the hand-built toy model with a known circuit."""

from __future__ import annotations

import numpy as np
import pytest

import _scoring_toy as T
from cbench.errors import UsageError
from cbench.scoring import faithfulness as F
from cbench.scoring.statistics import trapezoid
from cbench.scoring.task import circuit_mask, pair_data


@pytest.fixture(scope="module")
def toy():
    case = T.toy_case()
    data = pair_data(case, n=40, sampled=True)
    mask = circuit_mask(case.graph, case.truth_edges())
    return case, data, mask


def test_sizes_follow_the_grid_with_at_least_one_edge():
    assert [F.edges_at_size(46, k) for k in F.SIZE_GRID] == [1, 1, 1, 1, 1, 2, 4, 9, 23, 46]
    assert [F.edges_at_size(20000, k) for k in F.SIZE_GRID[:3]] == [20, 40, 100]
    scores = np.array([0.5, -3.0, 0.1, 2.0])
    signed = F.circuits_at_sizes(scores, grid=(0.25, 0.5))
    absolute = F.circuits_at_sizes(scores, grid=(0.25, 0.5), absolute=True)
    assert signed.tolist() == [[False, False, False, True], [True, False, False, True]]
    assert absolute.tolist() == [[False, True, False, False], [False, True, False, True]]
    with pytest.raises(UsageError):
        F.circuits_at_sizes([1.0, float("nan")])


def test_oracle_scores_recover_the_model(toy):
    case, data, mask = toy
    rng = np.random.default_rng(0)
    oracle = mask.astype(float) + 0.01 * rng.random(mask.size)  # circuit edges first
    res = F.evaluate_faithfulness(case, data, oracle)
    f = dict(zip(res.cpr_curve.grid, res.cpr_curve.f))
    assert f[1.0] == pytest.approx(1.0)
    assert f[0.5] == pytest.approx(1.0, abs=1e-5)  # 23 edges hold the whole 18-edge circuit
    assert res.cpr_curve.m_full == pytest.approx(0.0, abs=1e-6)  # KL of the model to itself
    assert res.cpr == pytest.approx(trapezoid(res.cpr_curve.f, F.SIZE_GRID))
    assert res.cmd == pytest.approx(trapezoid([abs(1 - x) for x in res.cmd_curve.f], F.SIZE_GRID))
    rand = F.evaluate_faithfulness(case, data, rng.uniform(-1, 1, mask.size))
    assert res.cpr > rand.cpr and res.cmd < rand.cmd
    d = res.to_dict()
    assert d["cpr_curve"]["n_edges"] == [1, 1, 1, 1, 1, 2, 4, 9, 23, 46] and d["metric"] == "kl"


@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_other_ablations(toy, ablation):
    case, data, mask = toy
    oracle = mask.astype(float)
    curve = F.faithfulness_curve(case, data, oracle, ablation=ablation, grid=(0.2, 0.5, 1.0))
    assert curve.f[1] == pytest.approx(1.0, abs=1e-5) and curve.f[2] == pytest.approx(1.0)
    assert curve.m_empty < 0


def test_label_metric(toy):
    case, data, mask = toy
    curve = F.faithfulness_curve(case, data, mask.astype(float), metric="ce", grid=(0.5, 1.0))
    assert curve.f[0] == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(UsageError):
        F.faithfulness_curve(case, data, mask.astype(float), metric="mse")
