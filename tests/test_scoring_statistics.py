"""cbench.scoring.statistics against hand-computed values and brute force."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from cbench.errors import UsageError
from cbench.scoring import statistics as st

MIB_GRID = [.001, .002, .005, .01, .02, .05, .1, .2, .5, 1.0]


# ----------------------------------------------------------------------------- AUROC
def test_auroc_with_ties_hand_computed():
    # positives {0.9, 0.8}, negatives {0.8, 0.3}: pairs 1 + 1 + ½ (tie) + 1 = 3.5 of 4
    curve = st.roc_curve([0.9, 0.8, 0.8, 0.3], [1, 1, 0, 0])
    assert curve.auroc == pytest.approx(0.875)
    # the tie at 0.8 is ONE threshold: the curve jumps diagonally from (0, .5) to (.5, 1)
    np.testing.assert_allclose(curve.fpr, [0, 0, 0.5, 1])
    np.testing.assert_allclose(curve.tpr, [0, 0.5, 1, 1])
    assert curve.thresholds[0] == np.inf
    np.testing.assert_allclose(curve.thresholds[1:], [0.9, 0.8, 0.3])


def test_auroc_all_tied_is_one_half_and_perfect_is_one():
    assert st.auroc([1.0] * 6, [1, 0, 1, 0, 0, 0]) == pytest.approx(0.5)
    assert st.auroc([5, 4, 3, 2, 1], [1, 1, 0, 0, 0]) == pytest.approx(1.0)
    assert st.auroc([1, 2, 3, 4, 5], [1, 1, 0, 0, 0]) == pytest.approx(0.0)


def test_auroc_equals_mann_whitney_form_on_heavily_tied_data():
    rng = np.random.default_rng(3)
    for _ in range(20):
        s = rng.integers(0, 4, size=60).astype(float)  # many ties
        y = rng.random(60) < 0.3
        if y.all() or not y.any():
            continue
        assert st.auroc(s, y) == pytest.approx(st.auroc_mann_whitney(s, y), abs=1e-12)
        # and the brute-force pair count
        pos, neg = s[y], s[~y]
        brute = (np.sum(pos[:, None] > neg[None, :]) + 0.5 * np.sum(pos[:, None] == neg[None, :])) \
            / (pos.size * neg.size)
        assert st.auroc(s, y) == pytest.approx(brute, abs=1e-12)


def test_auroc_rows_equals_auroc_per_row_with_ties():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 5, size=(40, 30)).astype(float)  # many ties
    y = np.arange(30) % 4 == 0
    got = st.auroc_rows(s, y)
    assert got.shape == (40,)
    assert got.tolist() == pytest.approx([st.auroc(row, y) for row in s], abs=1e-12)
    with pytest.raises(UsageError, match="positive and one negative"):
        st.auroc_rows(s, np.zeros(30, dtype=bool))
    with pytest.raises(UsageError, match=r"must be \[n, 30\]"):
        st.auroc_rows(s[0], y)


def test_auroc_refuses_bad_input():
    with pytest.raises(UsageError, match="positive and one negative"):
        st.auroc([1, 2], [1, 1])
    with pytest.raises(UsageError, match="finite"):
        st.auroc([1, float("nan")], [1, 0])


# ----------------------------------------------------------------------------- precision / recall
def test_precision_recall_hand_computed():
    pr = st.precision_recall([1, 1, 1, 0, 0], [1, 0, 1, 1, 0])
    assert (pr.tp, pr.fp, pr.fn, pr.tn) == (2, 1, 1, 1)
    assert pr.precision == pytest.approx(2 / 3)
    assert pr.recall == pytest.approx(2 / 3)
    empty = st.precision_recall([0, 0], [1, 0])
    assert math.isnan(empty.precision) and empty.recall == 0.0


# ----------------------------------------------------------------------------- trapezoid
def test_trapezoid_areas():
    assert st.trapezoid([0, 1, 1], [0, 1, 3]) == pytest.approx(0.5 + 2.0)
    assert st.trapezoid([2, 2], [0, 0.5]) == pytest.approx(1.0)
    # f == 1 on MIB's grid integrates to the grid's width, 1 - 0.001
    assert st.trapezoid([1.0] * 10, MIB_GRID) == pytest.approx(0.999)
    # f(k) = k integrates to (1 - 0.001²)/2 exactly: trapezoid is exact for linear functions
    assert st.trapezoid(MIB_GRID, MIB_GRID) == pytest.approx((1 - 0.001 ** 2) / 2)
    assert st.trapezoid([3.0], [0.2]) == 0.0


# ----------------------------------------------------------------------------- binomial
def test_binomial_tails_hand_computed():
    # P(X >= 8 | 10, ½) = (C(10,8) + C(10,9) + C(10,10)) / 2^10 = 56/1024
    assert st.binom_tail_ge(8, 10, 0.5) == pytest.approx(56 / 1024, rel=1e-12)
    assert st.binom_tail_le(2, 10, 0.5) == pytest.approx(56 / 1024, rel=1e-12)
    # P(X >= 0) = 1, P(X <= n) = 1
    assert st.binom_tail_ge(0, 7, 0.3) == pytest.approx(1.0)
    assert st.binom_tail_le(7, 7, 0.3) == pytest.approx(1.0)
    # P(X <= 95 | 100, 0.9)
    exact = sum(math.comb(100, k) * 0.9 ** k * 0.1 ** (100 - k) for k in range(96))
    assert st.binom_tail_le(95, 100, 0.9) == pytest.approx(exact, rel=1e-10)
    assert st.binomial_test(8, 10, 0.5, "greater") == pytest.approx(56 / 1024, rel=1e-12)
    assert st.binomial_test(0, 0, 0.9) == 1.0


# ----------------------------------------------------------------------------- HSIC
def test_hsic_two_points_hand_computed():
    # K = L = [[1, a], [a, 1]] with a = exp(-1/2) (bandwidth = median distance = 1);
    # HKH = (1-a)/2 [[1, -1], [-1, 1]], so tr(KHLH)/n² = (1-a)²/4
    a = math.exp(-0.5)
    assert st.hsic([0.0, 1.0], [0.0, 1.0]) == pytest.approx((1 - a) ** 2 / 4)
    assert st.median_bandwidth([0.0, 1.0, 3.0]) == pytest.approx(2.0)


def test_hsic_independent_vs_dependent():
    rng = np.random.default_rng(3)  # fixed draw; the test is calibrated (5% of seeds give p < .05)
    x = rng.normal(size=150)
    indep = st.hsic_permutation_test(x, rng.normal(size=150), n_permutations=300, seed=1)
    dep = st.hsic_permutation_test(x, x ** 2 + 0.05 * rng.normal(size=150), n_permutations=300, seed=1)
    assert indep.p_value > 0.05
    assert dep.p_value < 0.01
    assert dep.statistic > 5 * indep.statistic
    assert dep.n == 150 and dep.n_permutations == 300


def test_hsic_constant_sample_gives_p_one():
    # the paper's Tracr result: a complement that outputs a constant is independent, p = 1.0
    res = st.hsic_permutation_test(np.zeros(40), np.arange(40.0), n_permutations=200)
    assert res.statistic == pytest.approx(0.0, abs=1e-15)
    assert res.p_value == 1.0


# ----------------------------------------------------------------------------- method comparison
def test_a12_known_samples():
    # 1 vs {2,2,4}: 0; 2 vs {2,2,4}: ½+½; 3 vs {2,2,4}: 1+1 -> 3/9
    assert st.vargha_delaney_a12([1, 2, 3], [2, 2, 4]) == pytest.approx(1 / 3)
    assert st.vargha_delaney_a12([5, 6], [1, 2]) == 1.0
    assert st.vargha_delaney_a12([1, 1], [1, 1]) == 0.5


def test_mann_whitney_exact_small_sample():
    # completely separated samples of 3 and 3: exact two-sided p = 2 / C(6,3) = 0.1
    res = st.mann_whitney([1, 2, 3], [4, 5, 6])
    assert res.p_value == pytest.approx(0.1)
    assert res.u == 0.0 and res.a12 == 0.0
    same = st.mann_whitney([0.5, 0.5], [0.5, 0.5])
    assert same.p_value == 1.0 and same.a12 == 0.5


# ----------------------------------------------------------------------------- sample size
def _brute_confidence(n: int, p: Fraction, eps: Fraction) -> Fraction:
    k = math.ceil((p + eps) * n)  # exact rational arithmetic
    if k > n:
        return Fraction(0)
    return sum((math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k)), Fraction(0))


@pytest.mark.parametrize("p,eps,delta", [("0.5", "0.1", "0.9"), ("0.9", "0.05", "0.95"),
                                         ("0.8", "0.1", "0.99"), ("0.95", "0.04", "0.9")])
def test_sample_size_matches_brute_force(p, eps, delta):
    pf, ef, df = Fraction(p), Fraction(eps), Fraction(delta)
    brute = next(n for n in range(1, 5000) if _brute_confidence(n, pf, ef) >= df)
    n = st.percentile_sample_size(float(p), float(delta), float(eps))
    assert n == brute
    assert st.percentile_bound_confidence(n, float(p), float(eps)) >= float(delta)
    # exact search beats both closed-form bounds
    assert n <= st.chernoff_sample_size(float(p), float(delta), float(eps)) \
        <= st.hoeffding_sample_size(float(p), float(delta), float(eps))


def test_sample_size_confidence_ceiling_is_exact():
    # (0.95 + 0.01) * 100 = 96 exactly; a naive float ceiling would take 97
    assert st.percentile_bound_confidence(100, 0.95, 0.01) == pytest.approx(
        st.binom_tail_le(95, 100, 0.95))


def test_percentile_confidence_by_simulation():
    # Uniform(0,1): the true p-quantile is p itself
    rng = np.random.default_rng(7)
    n, p, eps = 200, 0.9, 0.03
    k = math.ceil((p + eps) * n)
    samples = np.sort(rng.random((20000, n)), axis=1)[:, k - 1]
    observed = np.mean(samples > p)
    assert observed == pytest.approx(st.percentile_bound_confidence(n, p, eps), abs=0.01)


def test_sample_size_refuses_bad_parameters():
    with pytest.raises(UsageError):
        st.percentile_sample_size(0.99, 0.9, 0.02)
    with pytest.raises(UsageError):
        st.percentile_sample_size(0.5, 1.5, 0.1)


def test_auroc_rows_equal_the_mid_rank_formula_with_and_without_ties():
    """The fast path (rows without ties ranked by sorting) gives rankdata's figures to the bit;
    rows with ties, infinities or NaN keep the mid-rank rule."""
    from scipy import stats as sps

    from cbench.scoring.statistics import auroc_rows

    rng = np.random.default_rng(3)
    for k in (2, 7, 110, 479):
        s = np.abs(rng.uniform(-1, 1, (200, k)))
        s[::5] = np.round(s[::5], 1)  # ties in every fifth row
        s[3, :2] = np.inf
        y = rng.random(k) < 0.3
        y[0], y[-1] = True, False
        n_pos, n_neg = int(y.sum()), int((~y).sum())
        ref = (sps.rankdata(s, axis=1)[:, y].sum(axis=1) - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
        assert np.array_equal(auroc_rows(s, y), ref)
    s = np.array([[0.1, np.nan, 0.3]])
    assert np.isnan(auroc_rows(s, np.array([True, False, False]))[0])
