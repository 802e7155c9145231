"""The five circuit hypothesis tests of Shi et al., "Hypothesis tests for circuits"
(papers/circuit-hypothesis-tests.txt, section 3 and appendix B), with the paper's defaults:
q* = 0.9, α = 0.05, ε = 0.1, 100 random circuits, 1000 permutations, HSIC with a Gaussian kernel
and the median-distance bandwidth.

Per-example score s(output, y) (higher is better): minus the per-example loss of
:mod:`cbench.tasks.metrics` — cross-entropy for categorical tasks (the log-probability of the label),
mean absolute error over positions for numerical tasks (the paper's Tracr score, a token-level
ℓ distance). Labels are the data's, or the full model's own outputs when the data has none.
Faithfulness F(M, C) = mean over examples of |s(M(x)) − s(C(x))|² (the paper's ℓ² choice).
C(x) runs the model with every edge outside C ablated (``resample`` from the paired source by
default; ``mean``/``zero`` as options); the complement C̄ ablates exactly C's edges.

Decisions ("pass" = the circuit behaves as the idealized circuit would):

* **equivalence** — Δ = s(C(x)) − s(M(x)); H0: |P(Δ > 0) − ½| < ε. Statistic t = |k/n − ½| with
  k = #{Δ > 0}; p = Σ_{j: |j/n − ½| ≥ t} Bin(n, ½ + ε)(j) (appendix B.1). Ties (|Δ| ≤ tie
  tolerance) carry no sign and are dropped, as in a sign test; if every Δ is a tie (the circuit
  reproduces the model), n = 0 and p = 1. Pass = H0 retained (p ≥ α).
* **independence** — H0: s(C̄(X)) ⊥ s(M(X)); HSIC permutation test, p = share of permutations
  with HSIC ≥ the observed one (appendix B.3; ``≥`` so that a constant complement gives p = 1).
  Pass = H0 retained.
* **minimality** — δ(e, C) = mean |s(C(x)) − s(C_{−e}(x))| for each circuit edge; reference:
  inflate C with one random input→logits path that adds at least one edge and remove one of the
  new edges chosen uniformly. Per edge, t = #{δ(e) > δ_ref} of n reference draws; H0:
  P(δ(e) > δ_ref) > q*; p = P(Bin(n, q*) ≤ t) (one-sided binomial, appendix B.2); an edge is
  unnecessary if p < α/m (Bonferroni over the m edges tested). Pass = no unnecessary edge.
* **sufficiency** — t = #{F(M, C) < F(M, C_r)} over n random circuits C_r of at least |C|
  edges (unions of random paths); H0: P(F(M,C) < F(M,C_r)) ≤ q*; p = P(Bin(n, q*) ≥ t).
  Pass = H0 rejected.
* **partial necessity** — t = #{F(M, C̄) > F(M, C̄_r)}; random C_r drawn from the whole model
  (``reference="model"``) or from C's complement (``reference="complement"``), |C| edges;
  H0 ≤ q*, same binomial test. Pass = H0 rejected.

Ablation and Tracr: the paper tests its Tracr circuits with zero ablation (appendix D), and so
does ``cbench test-circuit`` by default for Tracr models. Under resample ablation an edge that
carries only information base and source share — e.g. the q/k inputs of ``frac_prevs`` (case 3),
which read positions only — changes nothing when removed, so minimality rightly calls it
unnecessary *for that ablation*.

Every test returns a :class:`HypothesisTestResult` with the statistic, p-value, decision and the
sizes used (examples, circuit edges, random circuits or reference draws, permutations).
Masks are evaluated in batches through the runtime, each distinct mask once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from scipy import stats

from cbench.errors import UsageError
from cbench.scoring.statistics import binomial_test, hsic_permutation_test
from cbench.scoring.task import circuit_mask, outgoing_edges, random_circuit, random_path

__all__ = ["TESTS", "HypothesisTestResult", "equivalence", "independence", "minimality", "sufficiency",
           "partial_necessity", "run_test", "example_scores", "equivalence_p_value"]

TESTS = ("equivalence", "independence", "minimality", "sufficiency", "partial-necessity")
DEFAULTS = {"q_star": 0.9, "alpha": 0.05, "epsilon": 0.1, "n_random": 100, "n_permutations": 1000,
            "n_reference": 1000}


@dataclass
class HypothesisTestResult:
    test: str
    statistic: float
    p_value: float
    null_rejected: bool
    passed: bool
    alpha: float
    sizes: dict
    parameters: dict
    details: dict = field(default_factory=dict)

    @property
    def decision(self) -> str:
        return "pass" if self.passed else "fail"

    def to_dict(self) -> dict:
        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            if isinstance(v, (np.floating,)):
                return clean(float(v))
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, np.bool_):
                return bool(v)
            return v
        return clean({"test": self.test, "statistic": self.statistic, "p_value": self.p_value,
                      "null_rejected": self.null_rejected, "decision": self.decision, "alpha": self.alpha,
                      "sizes": self.sizes, "parameters": self.parameters, "details": self.details})


# ----------------------------------------------------------------------------- scores
class _Scorer:
    """Per-example scores of many masks on one dataset, with a cache keyed by mask."""

    def __init__(self, case, data, ablation: str = "resample", metric: str | None = None, positional: bool = True):
        from cbench.tasks import metrics as M

        self.case, self.data, self.ablation, self.positional = case, data, ablation, positional
        name = metric or ("ce" if case.task_type == "categorical" else "mae")
        M.check_metric(name, case.task_type)
        if name in ("kl", "l2"):
            raise UsageError(f"hypothesis tests need a per-example score against labels: ce, mae, mse or logit_diff "
                             f"(got {name!r})")
        self.rt = case.runtime
        with torch.no_grad():
            clean = self.rt.clean(data.base)
            self.ablated = self.rt.ablated_outputs(data.base, data.source, ablation, data.base, positional)
        self.metric = M.make_metric(name, case.task_type, clean_outputs=clean, labels=data.labels,
                                     valid=getattr(data, "valid", None))
        self.metric_name = name
        self.model_scores = -self.metric.per_example(clean).double().cpu().numpy()
        self._cache: dict[bytes, np.ndarray] = {}

    def scores(self, masks: np.ndarray) -> np.ndarray:
        """``[M, N]`` per-example scores for boolean masks ``[M, n_edges]``."""
        masks = np.atleast_2d(np.asarray(masks, dtype=bool))
        keys = [np.packbits(m).tobytes() for m in masks]
        todo = {}
        for k, m in zip(keys, masks):
            if k not in self._cache and k not in todo:
                todo[k] = m
        if todo:
            todo_keys = list(todo)
            stacked = torch.as_tensor(np.stack([todo[k] for k in todo_keys]), dtype=torch.float32)
            with torch.no_grad():
                outs = self.rt.run_masks(self.data.base, stacked, source=self.data.source, ablation=self.ablation,
                                         ablated=self.ablated)
                vals = -self.metric.per_example(outs).double().cpu().numpy()
            for k, v in zip(todo_keys, vals):
                self._cache[k] = v
        return np.stack([self._cache[k] for k in keys])

    @property
    def n_evaluated(self) -> int:
        return len(self._cache)


def example_scores(case, data, edges: Sequence[str] | np.ndarray, ablation: str = "resample",
                   metric: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(s(M(x)), s(C(x))) per example for the circuit ``edges`` (names or a boolean mask)."""
    sc = _Scorer(case, data, ablation, metric)
    return sc.model_scores, sc.scores(_mask(case, edges))[0]


def _mask(case, edges) -> np.ndarray:
    if isinstance(edges, np.ndarray) and edges.dtype == bool:
        case.graph.check_mask(edges)
        mask = edges
    else:
        mask = circuit_mask(case.graph, list(edges))
    if not mask.any():
        raise UsageError("the circuit is empty; a hypothesis test needs at least one edge")
    return mask


def _faithfulness(model_scores: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """F(M, C) = mean |s(M) − s(C)|² per row of ``scores [M, N]``."""
    return np.mean((scores - model_scores[None, :]) ** 2, axis=1)


def _common_sizes(case, data, mask) -> dict:
    return {"n_examples": int(data.n_examples), "circuit_edges": int(mask.sum()), "graph_edges": int(case.graph.n_edges)}


def _params(**kw) -> dict:
    return {k: v for k, v in kw.items()}


# ----------------------------------------------------------------------------- idealized tests
def equivalence_p_value(n: int, k: int, epsilon: float) -> tuple[float, float]:
    """(t, p) of the equivalence test for k of n untied examples where the circuit beats the
    model: t = |k/n − ½|, p = Σ_{j: |j/n − ½| ≥ t} Bin(n, ½ + ε)(j) (eq. 13); (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    t = abs(k / n - 0.5)
    j = np.arange(n + 1)
    region = np.abs(j / n - 0.5) >= t - 1e-12
    return float(t), float(min(1.0, np.sum(stats.binom.pmf(j[region], n, 0.5 + epsilon))))


def equivalence(case, data, edges, epsilon: float = 0.1, alpha: float = 0.05, ablation: str = "resample",
                metric: str | None = None, tie_tolerance: float = 1e-6, _scorer=None) -> HypothesisTestResult:
    if not 0 < epsilon < 0.5:
        raise UsageError(f"epsilon must be in (0, 0.5) (got {epsilon})")
    mask = _mask(case, edges)
    sc = _scorer or _Scorer(case, data, ablation, metric)
    s_m = sc.model_scores
    s_c = sc.scores(mask)[0]
    delta = s_c - s_m
    ties = np.abs(delta) <= tie_tolerance * np.maximum(1.0, np.abs(s_m))
    n = int((~ties).sum())
    k = int((delta[~ties] > 0).sum())
    t, p = equivalence_p_value(n, k, epsilon)
    rejected = p < alpha
    return HypothesisTestResult(
        "equivalence", float(t), p, rejected, not rejected, alpha,
        {**_common_sizes(case, data, mask), "n_untied": n, "n_ties": int(ties.sum()), "n_circuit_better": k},
        _params(epsilon=epsilon, ablation=ablation, metric=sc.metric_name, tie_tolerance=tie_tolerance),
        {"mean_delta": float(delta.mean()), "max_abs_delta": float(np.abs(delta).max()),
         "share_circuit_better": (k / n) if n else None})


def independence(case, data, edges, n_permutations: int = 1000, alpha: float = 0.05, ablation: str = "resample",
                 metric: str | None = None, seed: int = 0, _scorer=None) -> HypothesisTestResult:
    mask = _mask(case, edges)
    sc = _scorer or _Scorer(case, data, ablation, metric)
    s_knocked = sc.scores(~mask)[0]
    res = hsic_permutation_test(s_knocked, sc.model_scores, n_permutations=n_permutations, seed=seed)
    rejected = res.p_value < alpha
    return HypothesisTestResult(
        "independence", res.statistic, res.p_value, rejected, not rejected, alpha,
        {**_common_sizes(case, data, mask), "n_permutations": int(n_permutations)},
        _params(ablation=ablation, metric=sc.metric_name, kernel="gaussian", bandwidth="median distance",
                seed=seed, bandwidth_complement=res.bandwidth_x, bandwidth_model=res.bandwidth_y),
        {"p_value_rule": "share of permutations with HSIC >= observed"})


def _inflations(case, mask: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inflated circuits (C plus one random path adding >= 1 edge) and each one with one of
    its new edges removed: two boolean arrays ``[n, n_edges]``."""
    graph = case.graph
    out = outgoing_edges(graph)
    if mask.all():
        raise UsageError("the circuit already contains every edge; minimality has no reference edges")
    inflated = np.zeros((n, graph.n_edges), dtype=bool)
    removed = np.zeros_like(inflated)
    for i in range(n):
        for _ in range(10_000):
            path = np.asarray(random_path(graph, rng, _out=out))
            new = path[~mask[path]]
            if new.size:
                break
        else:  # pragma: no cover - every path stays inside C
            raise UsageError("no random path adds an edge to this circuit")
        inflated[i] = mask
        inflated[i, path] = True
        removed[i] = inflated[i]
        removed[i, int(rng.choice(new))] = False
    return inflated, removed


def minimality(case, data, edges, q_star: float = 0.9, alpha: float = 0.05, n_reference: int = 1000,
               ablation: str = "resample", metric: str | None = None, seed: int = 0,
               _scorer=None) -> HypothesisTestResult:
    _check_q(q_star)
    mask = _mask(case, edges)
    sc = _scorer or _Scorer(case, data, ablation, metric)
    idx = np.flatnonzero(mask)
    minus = np.repeat(mask[None], idx.size, axis=0)
    minus[np.arange(idx.size), idx] = False
    rng = np.random.default_rng(seed)
    inflated, removed = _inflations(case, mask, int(n_reference), rng)
    all_scores = sc.scores(np.concatenate([mask[None], minus, inflated, removed]))
    s_c, s_minus = all_scores[0], all_scores[1:1 + idx.size]
    s_inf = all_scores[1 + idx.size:1 + idx.size + n_reference]
    s_rem = all_scores[1 + idx.size + n_reference:]
    delta = np.mean(np.abs(s_c[None] - s_minus), axis=1)          # [m]
    delta_ref = np.mean(np.abs(s_inf - s_rem), axis=1)            # [n_reference]
    counts = np.sum(delta[:, None] > delta_ref[None, :], axis=1)  # [m]
    pvals = stats.binom.cdf(counts, n_reference, q_star)
    threshold = alpha / idx.size
    unnecessary = pvals < threshold
    names = [case.graph.edges[i].name for i in idx]
    per_edge = sorted(({"edge": n, "delta": float(d), "count": int(c), "p_value": float(p), "unnecessary": bool(u)}
                       for n, d, c, p, u in zip(names, delta, counts, pvals, unnecessary)),
                      key=lambda r: r["delta"])
    rejected = bool(unnecessary.any())
    return HypothesisTestResult(
        "minimality", float(np.min(counts) / n_reference), float(np.min(pvals)), rejected, not rejected, alpha,
        {**_common_sizes(case, data, mask), "n_reference": int(n_reference), "edges_tested": int(idx.size),
         "masks_evaluated": sc.n_evaluated},
        _params(q_star=q_star, ablation=ablation, metric=sc.metric_name, seed=seed, bonferroni_alpha=threshold),
        {"unnecessary_edges": [n for n, u in zip(names, unnecessary) if u], "per_edge": per_edge,
         "reference_delta": {"mean": float(delta_ref.mean()), "max": float(delta_ref.max()),
                             "quantile_q_star": float(np.quantile(delta_ref, q_star))},
         "statistic_is": "smallest share of reference draws an edge's delta exceeds; p_value is the smallest"})


# ----------------------------------------------------------------------------- flexible tests
def _check_q(q: float) -> None:
    if not 0 < q < 1:
        raise UsageError(f"q* must be in (0, 1) (got {q})")


def _random_masks(case, k: int, n: int, rng, allowed=None) -> np.ndarray:
    out = outgoing_edges(case.graph)
    return np.stack([random_circuit(case.graph, k, rng, allowed, _out=out) for _ in range(n)])


def sufficiency(case, data, edges, q_star: float = 0.9, alpha: float = 0.05, n_random: int = 100,
                size: int | None = None, ablation: str = "resample", metric: str | None = None, seed: int = 0,
                _scorer=None) -> HypothesisTestResult:
    _check_q(q_star)
    mask = _mask(case, edges)
    sc = _scorer or _Scorer(case, data, ablation, metric)
    k = int(size) if size is not None else int(mask.sum())
    rng = np.random.default_rng(seed)
    rand = _random_masks(case, k, int(n_random), rng)
    f = _faithfulness(sc.model_scores, sc.scores(np.concatenate([mask[None], rand])))
    f_star, f_rand = f[0], f[1:]
    t = int(np.sum(f_star < f_rand))
    p = binomial_test(t, int(n_random), q_star, "greater")
    rejected = p < alpha
    sizes_r = rand.sum(1)
    return HypothesisTestResult(
        "sufficiency", t / n_random, p, rejected, rejected, alpha,
        {**_common_sizes(case, data, mask), "n_random": int(n_random), "random_size_target": k,
         "random_sizes": {"min": int(sizes_r.min()), "mean": float(sizes_r.mean()), "max": int(sizes_r.max())}},
        _params(q_star=q_star, ablation=ablation, metric=sc.metric_name, seed=seed),
        {"faithfulness_circuit": float(f_star), "faithfulness_random_median": float(np.median(f_rand)),
         "n_circuit_more_faithful": t})


def partial_necessity(case, data, edges, q_star: float = 0.9, alpha: float = 0.05, n_random: int = 100,
                      size: int | None = None, reference: str = "model", ablation: str = "resample",
                      metric: str | None = None, seed: int = 0, _scorer=None) -> HypothesisTestResult:
    _check_q(q_star)
    if reference not in ("model", "complement"):
        raise UsageError(f"reference must be 'model' or 'complement' (got {reference!r})")
    mask = _mask(case, edges)
    sc = _scorer or _Scorer(case, data, ablation, metric)
    k = int(size) if size is not None else int(mask.sum())
    rng = np.random.default_rng(seed)
    allowed = ~mask if reference == "complement" else None
    rand = _random_masks(case, k, int(n_random), rng, allowed)
    f = _faithfulness(sc.model_scores, sc.scores(np.concatenate([~mask[None], ~rand])))
    f_star, f_rand = f[0], f[1:]
    t = int(np.sum(f_star > f_rand))
    p = binomial_test(t, int(n_random), q_star, "greater")
    rejected = p < alpha
    sizes_r = rand.sum(1)
    return HypothesisTestResult(
        "partial-necessity", t / n_random, p, rejected, rejected, alpha,
        {**_common_sizes(case, data, mask), "n_random": int(n_random), "random_size_target": k,
         "random_sizes": {"min": int(sizes_r.min()), "mean": float(sizes_r.mean()), "max": int(sizes_r.max())}},
        _params(q_star=q_star, ablation=ablation, metric=sc.metric_name, seed=seed, reference=reference),
        {"faithfulness_knocked_out": float(f_star), "faithfulness_random_knocked_out_median": float(np.median(f_rand)),
         "n_circuit_worse_to_knock_out": t})


_FUNCS = {"equivalence": equivalence, "independence": independence, "minimality": minimality,
          "sufficiency": sufficiency, "partial-necessity": partial_necessity}


def run_test(name: str, case, data, edges, **options) -> HypothesisTestResult:
    """Run test ``name`` (one of :data:`TESTS`); options are the test function's keywords
    (unknown ones are refused)."""
    import inspect

    if name not in _FUNCS:
        from cbench.errors import did_you_mean

        raise UsageError(f"unknown test {name!r}; choose one of: {', '.join(TESTS)}" + did_you_mean(name, TESTS))
    fn = _FUNCS[name]
    accepted = set(inspect.signature(fn).parameters) - {"case", "data", "edges", "_scorer"}
    unknown = sorted(k for k, v in options.items() if k not in accepted and v is not None)
    if unknown:
        raise UsageError(f"the {name} test has no option {', '.join(unknown)} (it takes: {', '.join(sorted(accepted))})")
    return fn(case, data, edges, **{k: v for k, v in options.items() if v is not None})
