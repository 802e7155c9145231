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


def test_every_circuit_has_its_own_loss_whatever_shares_its_batch(toy, monkeypatch):
    """CPR and CMD of several methods' scores at once (the bench: every method's on a case, each
    distinct circuit run once) equal each method's on its own to the bit: a circuit's loss does
    not depend on the other circuits of its batch, since each batch starts with the empty one."""
    from cbench.scoring.mib_neurons import faithfulness_figures, faithfulness_figures_of

    case, data, mask = toy
    rng = np.random.default_rng(3)
    names = case.graph.edge_names
    vectors = {"oracle": mask + 0.01 * rng.random(mask.size), "random": rng.uniform(-1, 1, mask.size),
               "negated": -(mask + 0.01 * rng.random(mask.size)), "nan": np.full(mask.size, np.nan)}
    vectors["copy"] = vectors["random"].copy()  # the same circuits as another method's
    docs = {k: {"method": {"name": k}, "edges": {n: {"score": float(v)} for n, v in zip(names, vec)}}
            for k, vec in vectors.items()}
    alone = {k: faithfulness_figures(case, data, doc) for k, doc in docs.items()}
    rows = []
    real = case.runtime.run_masks
    monkeypatch.setattr(case.runtime, "run_masks", lambda *a, **k: rows.append(len(a[1])) or real(*a, **k))
    together = faithfulness_figures_of(case, data, docs)
    assert together == alone  # every figure to the bit
    assert together["nan"] == {"cpr": None, "cmd": None} and together["oracle"]["cpr"] > together["random"]["cpr"]
    circuits = {m.tobytes() for k in ("oracle", "random", "negated") for absolute in (False, True)
                for m in F.circuits_at_sizes(vectors[k], absolute=absolute)}
    assert sum(rows) == len(circuits - {np.zeros(mask.size, bool).tobytes()}) + 1  # each once, the empty one too
    # one batch of every circuit, or each with the empty one only: the same losses to the bit
    masks = np.stack([np.frombuffer(m, dtype=bool) for m in sorted(circuits)])
    metric_fn, _ = F.task_metric(case, data)
    batched = F.circuit_losses(case.runtime, data, masks, metric_fn)
    assert batched.tolist() == [F.circuit_losses(case.runtime, data, m[None], metric_fn)[0] for m in masks]
    monkeypatch.setattr(F, "_BATCH_FLOATS", 1)  # two masks a batch: small circuits alone with the empty one
    assert F.circuit_losses(case.runtime, data, masks, metric_fn).tolist() == batched.tolist()
