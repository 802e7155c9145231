"""How well a tier of cases tells discovery methods apart (issue 34 item 6).

From one tier's table ``auroc[model][method]`` (edge AUROC, None where a run failed):

* per method: n, mean, std (population, as the bench's summary), median, min over models;
* ``spread_of_means``: the best method's mean minus the worst's;
* ``median_model_spread``: per model, max minus min AUROC over the methods, then the median
  over models (a tier where every method scores the same on each model has 0 here);
* ``saturated_models``: how many models every method scores >= ``saturation`` (0.95) on;
* per pair of methods a paired two-sided Wilcoxon signed-rank test over the models both scored
  (:func:`scipy.stats.wilcoxon`, its default ``zero_method='wilcox'``: zero differences are
  dropped; a pair whose differences are all zero gets p = 1), Holm-Bonferroni corrected across
  the pairs (:func:`holm`), and ``n_pairs_differ``: how many corrected p-values are < alpha.

"Real methods" leave out the random baseline and the oracle (exact activation patching) by
default (``exclude``): they bound the scale rather than compete on it.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Mapping, Sequence

import numpy as np

RANDOM = "random"
ORACLE = "activation-patching"
DEFAULT_EXCLUDE = (RANDOM, ORACLE)
TIERS = ("main", "appendix-h", "ioi", "tracr", "stress")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def paired_wilcoxon(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of paired ``x``, ``y`` (scipy's default
    ``zero_method='wilcox'``); 1.0 when every difference is zero (or there is no pair)."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    if d.size == 0 or not np.any(d != 0):
        return 1.0
    from scipy import stats

    with warnings.catch_warnings():  # few models: scipy warns about the normal approximation / exactness
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(x, y, alternative="two-sided").pvalue)


def discrimination(auroc: Mapping[str, Mapping[str, float | None]], methods: Iterable[str] | None = None,
                   exclude: Iterable[str] = DEFAULT_EXCLUDE, alpha: float = 0.05,
                   saturation: float = 0.95) -> dict:
    """The discrimination statistics of one tier (see the module docstring). ``methods``: the
    methods to consider (default: every method in the table, in first-seen order), less
    ``exclude``."""
    if methods is None:
        methods = list(dict.fromkeys(m for row in auroc.values() for m in row))
    excluded = set(exclude)
    methods = [m for m in methods if m not in excluded]
    models = list(auroc)

    def value(model, method):
        v = auroc[model].get(method)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    per_method = {}
    for m in methods:
        v = [x for x in (value(c, m) for c in models) if x is not None]
        per_method[m] = ({"n": len(v), "mean": float(np.mean(v)), "std": float(np.std(v)),
                          "median": float(np.median(v)), "min": float(np.min(v))} if v else {"n": 0})
    means = [s["mean"] for s in per_method.values() if s["n"]]
    spreads, saturated = [], 0
    for c in models:
        row = [value(c, m) for m in methods]
        row = [x for x in row if x is not None]
        if len(row) >= 2:
            spreads.append(max(row) - min(row))
        if row and len(row) == len(methods) and min(row) >= saturation:
            saturated += 1
    pairs = []
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            both = [(value(c, a), value(c, b)) for c in models]
            both = [(x, y) for x, y in both if x is not None and y is not None]
            if not both:
                continue
            x, y = zip(*both)
            pairs.append({"a": a, "b": b, "n": len(both), "mean_diff": float(np.mean(np.subtract(x, y))),
                          "p": paired_wilcoxon(x, y)})
    for pair, adj in zip(pairs, holm([pr["p"] for pr in pairs])):
        pair["p_holm"] = adj
    return {
        "methods": methods,
        "excluded": sorted(excluded),
        "n_models": len(models),
        "per_method": per_method,
        "spread_of_means": float(max(means) - min(means)) if means else None,
        "median_model_spread": float(np.median(spreads)) if spreads else None,
        "saturation": saturation,
        "saturated_models": saturated,
        "alpha": alpha,
        "pairs": pairs,
        "n_pairs": len(pairs),
        "n_pairs_differ": sum(1 for pr in pairs if pr["p_holm"] < alpha),
    }


def tier_of(case: str, kind: str | None, main_cases: Iterable[str]) -> str:
    """The tier of a bench case: ``stress`` (names ``stress-...``), ``ioi``, ``tracr``, ``main``
    (the 16 main SIIT cases) or ``appendix-h`` (every other SIIT case)."""
    name = str(case)
    if name.startswith("stress-"):
        return "stress"
    if kind == "ioi" or name == "ioi" or name.startswith("ioi"):
        return "ioi"
    if kind == "tracr" or name.startswith("tracr"):
        return "tracr"
    key = name.removeprefix("case-")
    return "main" if key in set(main_cases) else "appendix-h"


def by_tier(auroc: Mapping[str, Mapping[str, float | None]], kinds: Mapping[str, str],
            main_cases: Iterable[str], methods: Iterable[str] | None = None,
            exclude: Iterable[str] = DEFAULT_EXCLUDE) -> dict:
    """``{tier: discrimination(...)}`` for every tier with at least one scored case, tiers in
    :data:`TIERS` order; each block also lists its cases."""
    main_cases = tuple(main_cases)
    groups: dict[str, dict] = {}
    for case, row in auroc.items():
        groups.setdefault(tier_of(case, kinds.get(case), main_cases), {})[case] = row
    out = {}
    for tier in TIERS:
        if tier in groups:
            block = discrimination(groups[tier], methods, exclude)
            block["cases"] = list(groups[tier])
            out[tier] = block
    return out


def markdown(tiers: Mapping[str, dict]) -> str:
    """The per-tier discrimination block of the bench's table.md."""
    if not tiers:
        return ""
    lines = ["## Discrimination per tier", "",
             ("Real methods only (random and the oracle left out). Spread of means: best minus worst "
              "method mean; model spread: max - min over methods per model, median over models; saturated: "
              "models on which every method scores >= 0.95; pairs: paired two-sided Wilcoxon signed-rank "
              "tests over models, Holm-corrected, differing at alpha 0.05."), "",
             "| tier | models | methods | spread of means | median model spread | saturated | pairs differing |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def f(x):
        return "–" if x is None else f"{x:.3f}"

    for tier, b in tiers.items():
        lines.append(f"| {tier} | {b['n_models']} | {len(b['methods'])} | {f(b['spread_of_means'])} | "
                     f"{f(b['median_model_spread'])} | {b['saturated_models']}/{b['n_models']} | "
                     f"{b['n_pairs_differ']}/{b['n_pairs']} |")
    for tier, b in tiers.items():
        lines += ["", f"### {tier}: per method", "", "| method | n | mean | std | median | min |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for m, s in b["per_method"].items():
            if s["n"]:
                lines.append(f"| {m} | {s['n']} | {s['mean']:.3f} | {s['std']:.3f} | {s['median']:.3f} | {s['min']:.3f} |")
            else:
                lines.append(f"| {m} | 0 | – | – | – | – |")
    return "\n".join(lines) + "\n"
