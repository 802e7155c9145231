"""cbench.scoring.adversarial on the toy model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import _scoring_toy as T
from cbench.errors import UsageError
from cbench.scoring import adversarial as A
from cbench.scoring.statistics import percentile_sample_size
from cbench.scoring.task import circuit_mask, pair_data


@pytest.fixture(scope="module")
def toy():
    case = T.toy_case()
    data = pair_data(case, n=24, sampled=True)
    return case, data, circuit_mask(case.graph, case.truth_edges())


def test_ground_truth_circuit_never_diverges(toy):
    case, data, mask = toy
    res = A.adversarial_evaluation(case, data, mask, k_worst=3)
    assert res.values.shape == (24, 24)
    assert res.summary["raw"]["count"] == 576
    assert res.summary["raw"]["max"] == pytest.approx(0.0, abs=1e-6)


def test_partial_circuit_distribution_and_worst_pairs(toy):
    case, data, mask = toy
    part = mask.copy()
    part[case.graph.edge_index("m0->a1.h1<v>")] = False
    part[case.graph.edge_index("a0.h0->logits")] = False
    res = A.adversarial_evaluation(case, data, part, k_worst=4, percentile=0.95, confidence=0.9, margin=0.02)
    v = res.values
    # one pair computed directly: KL(model || circuit) averaged over positions 1..P-1
    i, j = 5, 11
    with torch.no_grad():
        out = case.runtime.run(data.base[i:i + 1], data.source[j:j + 1], edge_mask=part).output
        clean = case.runtime.clean(data.base[i:i + 1])
    lq, lp = torch.log_softmax(clean, -1), torch.log_softmax(out, -1)
    kl = float((lq.exp() * (lq - lp)).sum(-1)[0, 1:].mean())
    assert v[i, j] == pytest.approx(kl, rel=1e-4, abs=1e-7)
    raw, z = res.summary["raw"], res.summary["z"]
    assert raw["mean"] == pytest.approx(v.mean()) and raw["std"] == pytest.approx(v.std())
    assert raw["99%"] == pytest.approx(np.percentile(v, 99)) and raw["max"] == pytest.approx(v.max())
    assert z["max"] == pytest.approx((v.max() - v.mean()) / v.std())
    worst = [w["value"] for w in res.worst]
    assert worst == sorted(worst, reverse=True) and worst[0] == pytest.approx(v.max())
    assert set(res.worst[0]) >= {"base", "source", "model_top", "circuit_top"}
    assert res.sample_size["n"] == percentile_sample_size(0.95, 0.9, 0.02)
    assert res.to_dict()["pairs"] == 576


def test_empty_circuit_refused(toy):
    case, data, mask = toy
    with pytest.raises(UsageError, match="empty"):
        A.adversarial_evaluation(case, data, np.zeros_like(mask))


@pytest.mark.parametrize("value", [0.1, 0.7, 5.6, 1e-9, 0.0])
def test_constant_values_have_no_z_scores(value):
    # issue 14: np.std of a constant vector is rounding noise (1.4e-17 for 0.1), which passed an
    # exact `std == 0` guard and gave z-scores of 1.0
    s = A.summarize(np.full(300, value))
    assert all(z is None for z in s["z"].values())


def test_tiny_but_real_spread_keeps_z_scores():
    v = np.array([1e-9, 2e-9, 3e-9])
    z = A.summarize(v)["z"]
    assert z["max"] == pytest.approx((3e-9 - 2e-9) / np.std(v))
