"""The statistics behind cbench's scores, in plain numpy/scipy (no torch, no model).

* :func:`roc_curve` / :func:`auroc` — ROC over a score vector against binary labels. Equal
  scores are **one threshold**: the curve moves diagonally through a block of tied scores, so
  the area equals the Mann–Whitney probability P(score_pos > score_neg) + ½·P(tie)
  (:func:`auroc_mann_whitney` computes that form independently; tests check they agree).
* :func:`precision_recall` — of one predicted circuit against the truth.
* :func:`trapezoid` — the trapezoid rule over an explicit grid (used for ROC area, CPR, CMD).
* :func:`binom_tail_ge`, :func:`binom_tail_le`, :func:`binomial_test` — exact binomial tails
  through ``scipy.stats``.
* :func:`hsic` and :func:`hsic_permutation_test` — the Hilbert–Schmidt independence criterion
  (Gretton et al. 2007, biased estimator tr(KHLH)/n²) with a Gaussian kernel whose bandwidth is
  the median pairwise distance, and the permutation test of the circuit-hypothesis-tests paper
  (Algorithm 2).
* :func:`mann_whitney` and :func:`vargha_delaney_a12` — comparing two methods' AUROC samples
  as InterpBench's tables 8–9 do.
* :func:`percentile_bound_confidence` and :func:`percentile_sample_size` — the adversarial
  circuit-evaluation paper's exact sample-size search (Proposition 2.1), with the looser
  Chernoff and Hoeffding sample sizes for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from cbench.errors import UsageError

__all__ = [
    "RocCurve", "roc_curve", "auroc", "auroc_mann_whitney", "PrecisionRecall", "precision_recall",
    "trapezoid", "binom_tail_ge", "binom_tail_le", "binomial_test", "gaussian_gram",
    "median_bandwidth", "hsic", "HsicTest", "hsic_permutation_test", "MannWhitney", "mann_whitney",
    "vargha_delaney_a12", "percentile_bound_confidence", "percentile_sample_size",
    "chernoff_sample_size", "hoeffding_sample_size",
]


# ----------------------------------------------------------------------------- ROC / AUROC
@dataclass(frozen=True)
class RocCurve:
    """Points of a ROC curve from (0, 0) to (1, 1).

    ``thresholds[i]`` is the score cut of point i: "predicted positive" means ``score >=
    thresholds[i]``; point 0 has threshold +inf (nothing predicted). One point per distinct
    score, so tied scores never produce intermediate points.
    """

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    auroc: float
    n_pos: int
    n_neg: int


def _scores_and_labels(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel()
    if s.shape != y.shape:
        raise UsageError(f"scores and labels differ in length ({s.size} vs {y.size})")
    if not np.all(np.isfinite(s)):
        bad = int(np.flatnonzero(~np.isfinite(s))[0])
        raise UsageError(f"score #{bad} is {s[bad]!r}; scores must be finite numbers")
    y = y.astype(bool)
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        raise UsageError("a ROC curve needs at least one positive and one negative label "
                         f"(got {n_pos} positives out of {y.size})")
    return s, y


def roc_curve(scores, labels) -> RocCurve:
    """ROC curve of ``scores`` (higher = more likely positive) against boolean ``labels``."""
    s, y = _scores_and_labels(scores, labels)
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    # last index of each block of equal scores: one threshold per distinct value
    distinct = np.flatnonzero(np.diff(s_sorted)) if s_sorted.size > 1 else np.array([], dtype=int)
    ends = np.r_[distinct, s_sorted.size - 1]
    tp = np.cumsum(y_sorted)[ends]
    fp = (ends + 1) - tp
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    tpr = np.r_[0.0, tp / n_pos]
    fpr = np.r_[0.0, fp / n_neg]
    thresholds = np.r_[np.inf, s_sorted[ends]]
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=thresholds, auroc=trapezoid(tpr, fpr),
                    n_pos=n_pos, n_neg=n_neg)


def auroc(scores, labels) -> float:
    """Area under the ROC curve (ties as one threshold)."""
    return roc_curve(scores, labels).auroc


def auroc_mann_whitney(scores, labels) -> float:
    """AUROC as P(s_pos > s_neg) + ½ P(s_pos = s_neg), from mid-ranks (the U statistic)."""
    s, y = _scores_and_labels(scores, labels)
    ranks = stats.rankdata(s)  # average ranks for ties
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def _rows_and_labels(scores, labels, what: str) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Score rows ``[n, k]`` and boolean ``labels`` [k] checked, with the counts of positives and
    negatives (``what`` names the figure in the error)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    if s.ndim != 2 or s.shape[1] != y.size:
        raise UsageError(f"scores must be [n, {y.size}], got {list(s.shape)}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise UsageError(f"{what} needs at least one positive and one negative label")
    return s, y, n_pos, n_neg


def auroc_rows(scores, labels) -> np.ndarray:
    """AUROC of each row of ``scores`` [n, k] against one boolean ``labels`` [k], from mid-ranks
    (ties count one half, as :func:`auroc`)."""
    s, y, n_pos, n_neg = _rows_and_labels(scores, labels, "AUROC")
    return (_positive_rank_sums(s, y) - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def _positive_rank_sums(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of ``s``, the sum of the positives' mid-ranks (``rankdata(s, axis=1)[:, y].sum(1)``).
    A row without ties (continuous random draws) ranks 1..k: the sum of the positives' places in
    the row's sorted order, an exact integer (a float64 sum of integer ranks is exact too, so the
    value is rankdata's to the bit) at a quarter of its cost; rows with ties (or NaN) take rankdata."""
    k = s.shape[1]
    if s.shape[0] == 0 or k == 0 or np.isnan(s).any():
        return stats.rankdata(s, axis=1)[:, y].sum(axis=1)
    order = np.argsort(s, axis=1)
    ranked = np.take_along_axis(s, order, axis=1)
    tied = (ranked[:, 1:] == ranked[:, :-1]).any(axis=1)
    sums = (y[order] * np.arange(1, k + 1)).sum(axis=1).astype(np.float64)
    if tied.any():
        sums[tied] = stats.rankdata(s[tied], axis=1)[:, y].sum(axis=1)
    return sums



def mean_roc_rows(scores, labels, chunk: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """The vertical average of the ROC curves of many score rows ``[n, k]`` over one boolean
    ``labels`` [k]: at each false positive rate j / n_neg, the mean over rows of the true positive
    rate there (the share of positives ranked above a row's j-th negative). Returned as the
    staircase ``(fpr, tpr)``, whose area is the mean of the rows' AUROCs (exactly, for rows
    without ties, as continuous random draws have): the random baseline's curve, drawn from the
    same draws as its mean AUROC."""
    s, y, n_pos, n_neg = _rows_and_labels(scores, labels, "a ROC curve")
    total = np.zeros(n_neg)
    for i in range(0, s.shape[0], chunk):
        ranked = y[np.argsort(-s[i:i + chunk], axis=1, kind="stable")]  # labels in each row's order
        above = np.cumsum(ranked, axis=1)
        total += above[~ranked].reshape(-1, n_neg).sum(axis=0)  # positives above each negative
    return roc_staircase(total / (s.shape[0] * n_pos))


def roc_staircase(tpr_at) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr)`` of the ROC staircase whose true positive rate is ``tpr_at[j]`` between false
    positive rates j / n and (j + 1) / n (n = len(tpr_at)): its area is the mean of ``tpr_at``."""
    tpr_at = np.asarray(tpr_at, dtype=np.float64)
    steps = np.arange(tpr_at.size + 1) / tpr_at.size
    fpr = np.concatenate([[0.0], np.repeat(steps, 2)[1:-1], [1.0]])
    tpr = np.concatenate([[0.0], np.repeat(tpr_at, 2), [1.0]])
    return fpr, tpr


# ----------------------------------------------------------------------------- precision / recall
@dataclass(frozen=True)
class PrecisionRecall:
    """Counts and rates of a predicted set against the truth. A rate whose denominator is 0 is
    NaN (e.g. precision of an empty prediction)."""

    tp: int
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float
    f1: float


def precision_recall(predicted, truth) -> PrecisionRecall:
    p = np.asarray(predicted, dtype=bool).ravel()
    t = np.asarray(truth, dtype=bool).ravel()
    if p.shape != t.shape:
        raise UsageError(f"prediction and truth differ in length ({p.size} vs {t.size})")
    tp = int(np.sum(p & t))
    fp = int(np.sum(p & ~t))
    fn = int(np.sum(~p & t))
    tn = int(np.sum(~p & ~t))
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan
    return PrecisionRecall(tp, fp, fn, tn, precision, recall, f1)


# ----------------------------------------------------------------------------- integration
def trapezoid(y: Sequence[float], x: Sequence[float]) -> float:
    """∫ y dx by the trapezoid rule on the points (x[i], y[i]) in the order given."""
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if y.shape != x.shape or y.ndim != 1:
        raise UsageError(f"trapezoid needs two equal-length 1-d sequences (got {y.shape}, {x.shape})")
    if y.size < 2:
        return 0.0
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))


# ----------------------------------------------------------------------------- binomial
def binom_tail_ge(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Bin(n, p), exactly (scipy's survival function)."""
    return float(stats.binom.sf(k - 1, n, p))


def binom_tail_le(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Bin(n, p), exactly."""
    return float(stats.binom.cdf(k, n, p))


def binomial_test(successes: int, n: int, p: float, alternative: str = "greater") -> float:
    """Exact binomial test p-value (``scipy.stats.binomtest``); alternative is 'greater',
    'less' or 'two-sided'. ``n == 0`` gives p = 1 (no evidence)."""
    if n == 0:
        return 1.0
    return float(stats.binomtest(int(successes), int(n), float(p), alternative=alternative).pvalue)


# ----------------------------------------------------------------------------- HSIC
def _as_2d(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise UsageError(f"HSIC needs one sample per row (got an array of shape {a.shape})")
    return a


def _sq_dists(a: np.ndarray) -> np.ndarray:
    sq = np.sum(a * a, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (a @ a.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return d2


def median_bandwidth(x) -> float:
    """Median of the non-zero pairwise Euclidean distances (1.0 when every distance is 0)."""
    a = _as_2d(x)
    d = np.sqrt(_sq_dists(a)[np.triu_indices(a.shape[0], k=1)])
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def gaussian_gram(x, bandwidth: float | None = None) -> np.ndarray:
    """K_ij = exp(-|x_i - x_j|² / (2 ρ²)), ρ the median distance unless given."""
    a = _as_2d(x)
    rho = median_bandwidth(a) if bandwidth is None else float(bandwidth)
    if not rho > 0:
        raise UsageError(f"an HSIC bandwidth must be positive (got {rho})")
    return np.exp(-_sq_dists(a) / (2.0 * rho * rho))


def _center(k: np.ndarray) -> np.ndarray:
    return k - k.mean(axis=0, keepdims=True) - k.mean(axis=1, keepdims=True) + k.mean()


def hsic(x, y, bandwidth_x: float | None = None, bandwidth_y: float | None = None) -> float:
    """Biased HSIC estimate tr(K H L H) / n² with Gaussian kernels (median bandwidths)."""
    kx, ly = gaussian_gram(x, bandwidth_x), gaussian_gram(y, bandwidth_y)
    if kx.shape != ly.shape:
        raise UsageError(f"HSIC needs paired samples (got {kx.shape[0]} and {ly.shape[0]})")
    n = kx.shape[0]
    return float(np.sum(_center(kx) * ly) / (n * n))


@dataclass(frozen=True)
class HsicTest:
    statistic: float
    p_value: float
    n: int
    n_permutations: int
    bandwidth_x: float
    bandwidth_y: float


def hsic_permutation_test(x, y, n_permutations: int = 1000, seed: int = 0,
                          bandwidth_x: float | None = None, bandwidth_y: float | None = None,
                          rtol: float = 1e-9) -> HsicTest:
    """Permutation test of independence of paired samples x, y (the paper's Algorithm 2).

    y is permuted ``n_permutations`` times; the p-value is the share of permuted HSIC values
    **at least** the observed one (up to ``rtol``, so that round-off does not break ties). With
    ``>=`` a constant sample (every HSIC exactly 0) gives p = 1, the paper's value for its Tracr
    circuits; a strict ``>`` would give p = 0 there and reject independence for a circuit whose
    complement does nothing at all.
    """
    a, b = _as_2d(x), _as_2d(y)
    if a.shape[0] != b.shape[0]:
        raise UsageError(f"HSIC needs paired samples (got {a.shape[0]} and {b.shape[0]})")
    n = a.shape[0]
    if n < 2:
        raise UsageError("an independence test needs at least 2 examples")
    rx = median_bandwidth(a) if bandwidth_x is None else float(bandwidth_x)
    ry = median_bandwidth(b) if bandwidth_y is None else float(bandwidth_y)
    kc = _center(gaussian_gram(a, rx))
    ly = gaussian_gram(b, ry)
    observed = float(np.sum(kc * ly) / (n * n))
    rng = np.random.default_rng(seed)
    tol = rtol * max(1.0, abs(observed))
    hits = 0
    for _ in range(int(n_permutations)):
        perm = rng.permutation(n)
        value = np.sum(kc * ly[np.ix_(perm, perm)]) / (n * n)
        hits += value >= observed - tol
    p = hits / n_permutations if n_permutations else 1.0
    return HsicTest(statistic=observed, p_value=float(p), n=n, n_permutations=int(n_permutations),
                    bandwidth_x=rx, bandwidth_y=ry)


# ----------------------------------------------------------------------------- method comparison
@dataclass(frozen=True)
class MannWhitney:
    u: float
    p_value: float
    a12: float
    n_x: int
    n_y: int


def vargha_delaney_a12(x, y) -> float:
    """Â12 = P(X > Y) + ½ P(X = Y) over all pairs of the two samples."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise UsageError("A12 needs two non-empty samples")
    gt = np.sum(a[:, None] > b[None, :])
    eq = np.sum(a[:, None] == b[None, :])
    return float((gt + 0.5 * eq) / (a.size * b.size))


def mann_whitney(x, y, alternative: str = "two-sided") -> MannWhitney:
    """Wilcoxon–Mann–Whitney U test (scipy; exact for small samples without ties, else the
    normal approximation with tie correction) and the Vargha–Delaney effect size."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise UsageError("a Mann-Whitney test needs two non-empty samples")
    res = stats.mannwhitneyu(a, b, alternative=alternative)
    p = float(res.pvalue)
    if math.isnan(p):  # every value identical: no evidence of a difference
        p = 1.0
    return MannWhitney(u=float(res.statistic), p_value=p, a12=vargha_delaney_a12(a, b),
                       n_x=int(a.size), n_y=int(b.size))


# ----------------------------------------------------------------------------- percentile sample sizes
def _order_index(n: int | np.ndarray, p: float, eps: float):
    """⌈(p+ε)·n⌉, computed so that exact products (0.96·100 = 96) are not pushed up by
    floating-point error."""
    prod = np.asarray(n, dtype=np.float64) * (p + eps)
    return np.ceil(np.round(prod, 9)).astype(np.int64)


def _check_pct(p: float, eps: float, delta: float | None = None) -> None:
    if not 0 < p < 1:
        raise UsageError(f"the percentile p must be in (0, 1) (got {p})")
    if not (eps > 0 and p + eps < 1):
        raise UsageError(f"the margin must satisfy 0 < eps and p + eps < 1 (got p={p}, eps={eps})")
    if delta is not None and not 0 < delta < 1:
        raise UsageError(f"the confidence must be in (0, 1) (got {delta})")


def percentile_bound_confidence(n: int, p: float, eps: float) -> float:
    """P(X_(⌈(p+ε)n⌉) ≥ true p-quantile) for n i.i.d. samples = F_Bin(n,p)(⌈(p+ε)n⌉ − 1)
    (Proposition 2.1 of the adversarial circuit-evaluation paper). 0 when the order statistic
    does not exist (⌈(p+ε)n⌉ > n)."""
    _check_pct(p, eps)
    k = int(_order_index(n, p, eps))
    if k > n or n < 1:
        return 0.0
    return float(stats.binom.cdf(k - 1, n, p))


def percentile_sample_size(p: float, delta: float, eps: float, n_max: int = 100_000_000,
                           chunk: int = 200_000) -> int:
    """Smallest n with F_Bin(n,p)(⌈(p+ε)n⌉ − 1) ≥ δ, by exact search over n = 1, 2, ...

    The confidence is not monotone in n (the ceiling jumps), so this is a scan, vectorised in
    chunks; the Chernoff size is an upper bound for the answer and caps the scan.
    """
    _check_pct(p, eps, delta)
    limit = min(int(n_max), chernoff_sample_size(p, delta, eps) + 1)
    start = 1
    while start <= limit:
        ns = np.arange(start, min(start + chunk, limit + 1), dtype=np.int64)
        ks = _order_index(ns, p, eps)
        ok = ks <= ns
        conf = np.where(ok, stats.binom.cdf(ks - 1, ns, p), 0.0)
        hit = np.flatnonzero(conf >= delta)
        if hit.size:
            return int(ns[hit[0]])
        start += chunk
    raise UsageError(f"no sample size up to {n_max} reaches confidence {delta} for the "
                     f"{p} percentile with margin {eps}")


def _bernoulli_kl(a: float, b: float) -> float:
    return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))


def chernoff_sample_size(p: float, delta: float, eps: float) -> int:
    """n = ⌈ln(1/(1−δ)) / KL(p+ε ‖ p)⌉ from the Chernoff bound (an upper bound on the exact n)."""
    _check_pct(p, eps, delta)
    return int(math.ceil(math.log(1.0 / (1.0 - delta)) / _bernoulli_kl(p + eps, p)))


def hoeffding_sample_size(p: float, delta: float, eps: float) -> int:
    """n = ⌈ln(1/(1−δ)) / (2ε²)⌉ from Hoeffding's inequality (looser still)."""
    _check_pct(p, eps, delta)
    return int(math.ceil(math.log(1.0 / (1.0 - delta)) / (2.0 * eps * eps)))
