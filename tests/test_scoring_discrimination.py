"""Discrimination statistics of a tier (scoring/discrimination.py) against scipy and an
independent Holm-Bonferroni implementation, on a fixed table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from cbench import schemas
from cbench.scoring.bench import MAIN_CASES
from cbench.scoring.discrimination import by_tier, discrimination, holm, markdown, tier_of

# 8 models x 5 methods (+ random and the oracle, left out by default); one failed run (None)
TABLE = {
    "3": {"acdc": 1.00, "eap": 0.97, "eap-ig-inputs": 0.98, "ifr": 0.71, "atp-star": 0.99, "random": 0.50,
          "activation-patching": 1.0},
    "4": {"acdc": 0.96, "eap": 0.91, "eap-ig-inputs": 0.93, "ifr": 0.80, "atp-star": 0.95, "random": 0.49,
          "activation-patching": 1.0},
    "8": {"acdc": 0.99, "eap": 0.99, "eap-ig-inputs": 0.99, "ifr": 0.66, "atp-star": 0.99, "random": 0.52,
          "activation-patching": 1.0},
    "11": {"acdc": 0.97, "eap": 0.88, "eap-ig-inputs": 0.90, "ifr": 0.75, "atp-star": 0.96, "random": 0.51,
           "activation-patching": 1.0},
    "13": {"acdc": 0.98, "eap": 0.95, "eap-ig-inputs": 0.96, "ifr": 0.72, "atp-star": None, "random": 0.50,
           "activation-patching": 1.0},
    "18": {"acdc": 0.95, "eap": 0.96, "eap-ig-inputs": 0.97, "ifr": 0.69, "atp-star": 0.97, "random": 0.48,
           "activation-patching": 1.0},
    "19": {"acdc": 1.00, "eap": 0.93, "eap-ig-inputs": 0.92, "ifr": 0.83, "atp-star": 0.98, "random": 0.50,
           "activation-patching": 1.0},
    "20": {"acdc": 0.94, "eap": 0.90, "eap-ig-inputs": 0.91, "ifr": 0.77, "atp-star": 0.93, "random": 0.53,
           "activation-patching": 1.0},
}
REAL = ["acdc", "eap", "eap-ig-inputs", "ifr", "atp-star"]


def holm_reference(p):
    """Holm (1979) written the textbook way: reject in order of p while p_(i) <= alpha / (m - i);
    adjusted p_(i) = max_{j <= i} min(1, (m - j) p_(j))."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    best = 0.0
    for j, i in enumerate(order):
        best = max(best, min(1.0, (m - j) * p[i]))
        out[i] = best
    return out


def test_statistics_equal_scipy_on_a_fixed_table():
    d = discrimination(TABLE)
    assert d["methods"] == REAL and d["n_models"] == 8
    for m in REAL:
        v = [TABLE[c][m] for c in TABLE if TABLE[c][m] is not None]
        s = d["per_method"][m]
        assert s["n"] == len(v)
        assert s["mean"] == pytest.approx(np.mean(v)) and s["std"] == pytest.approx(np.std(v))
        assert s["median"] == pytest.approx(np.median(v)) and s["min"] == pytest.approx(min(v))
    means = [d["per_method"][m]["mean"] for m in REAL]
    assert d["spread_of_means"] == pytest.approx(max(means) - min(means))
    spreads = [max(x for x in (TABLE[c][m] for m in REAL) if x is not None)
               - min(x for x in (TABLE[c][m] for m in REAL) if x is not None) for c in TABLE]
    assert d["median_model_spread"] == pytest.approx(np.median(spreads))
    assert d["saturated_models"] == 0  # ifr is below 0.95 everywhere
    # every pair: scipy's paired two-sided Wilcoxon on the models both scored
    assert [(p["a"], p["b"]) for p in d["pairs"]] == list(itertools.combinations(REAL, 2))
    raw = []
    for pair in d["pairs"]:
        both = [(TABLE[c][pair["a"]], TABLE[c][pair["b"]]) for c in TABLE
                if TABLE[c][pair["a"]] is not None and TABLE[c][pair["b"]] is not None]
        x, y = map(np.array, zip(*both))
        assert pair["n"] == len(both)
        expected = 1.0 if np.all(x == y) else stats.wilcoxon(x, y, zero_method="wilcox",
                                                              alternative="two-sided").pvalue
        assert pair["p"] == pytest.approx(expected, rel=1e-12)
        raw.append(expected)
    adjusted = holm_reference(raw)
    assert [p["p_holm"] for p in d["pairs"]] == pytest.approx(adjusted, rel=1e-12)
    assert d["n_pairs"] == 10
    assert d["n_pairs_differ"] == sum(a < 0.05 for a in adjusted)
    # 8 models: the smallest exact two-sided p is 2 / 2^8 = 0.0078, times 10 pairs > 0.05 -- no pair can differ
    assert d["n_pairs_differ"] == 0 and min(raw) == pytest.approx(2 / 2**8)
    # 16 models (each row again, shifted): ifr now differs from every other method
    bigger = dict(TABLE, **{f"{c}b": {m: (None if v is None else v - 0.004 * (i % 3)) for m, v in row.items()}
                            for i, (c, row) in enumerate(TABLE.items())})
    d16 = discrimination(bigger)
    differ = {(p["a"], p["b"]) for p in d16["pairs"] if p["p_holm"] < 0.05}
    assert {("acdc", "ifr"), ("eap", "ifr"), ("eap-ig-inputs", "ifr"), ("ifr", "atp-star")} <= differ
    assert d16["n_pairs_differ"] == len(differ) < 10


def test_all_zero_differences_give_p_one_and_saturation_counts():
    table = {str(i): {"a": 0.97 + 0.001 * i, "b": 0.97 + 0.001 * i, "c": 0.96} for i in range(6)}
    d = discrimination(table)
    ab = next(p for p in d["pairs"] if (p["a"], p["b"]) == ("a", "b"))
    assert ab["p"] == 1.0 and ab["mean_diff"] == 0.0
    assert d["saturated_models"] == 6
    with_oracle = discrimination({**table, "x": {"a": 1.0, "b": 1.0, "c": 0.5}}, exclude=())
    assert with_oracle["excluded"] == [] and with_oracle["saturated_models"] == 6


def test_holm_matches_the_reference_and_is_monotone():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 12)).tolist()
        assert holm(p) == pytest.approx(holm_reference(p))
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_tiers_and_the_results_block_validate():
    assert tier_of("3", "siit", ["3"]) == "main"
    assert tier_of("101", "siit", ["3"]) == "appendix-h"
    assert tier_of("ioi", "ioi", ["3"]) == "ioi"
    assert tier_of("tracr-case-21", "tracr", ["3"]) == "tracr" and tier_of("21", "tracr", ["3"]) == "tracr"
    assert tier_of("stress-backup-heads", "siit", ["3"]) == "stress"
    table = dict(TABLE, ioi={"acdc": 0.8, "eap": 0.7}, **{"stress-a": {"acdc": 0.9, "eap": 0.6}})
    kinds = {c: "siit" for c in TABLE} | {"ioi": "ioi", "stress-a": "siit"}
    tiers = by_tier(table, kinds, ["3", "4", "8", "11"])
    assert list(tiers) == ["main", "appendix-h", "ioi", "stress"]
    assert tiers["main"]["cases"] == ["3", "4", "8", "11"] and tiers["ioi"]["n_models"] == 1
    doc = {"schema": "cbench/results/v1", "kind": "bench", "cases": list(table), "inputs": {},
           "results": {"auroc": table, "discrimination": tiers}, "cbench_version": "0.1.0",
           "created": "2026-11-22T00:05:12Z"}
    schemas.check(doc, "results")
    md = markdown(tiers)
    assert "## Discrimination per tier" in md and "| main | 4 | 5 |" in md and "### stress: per method" in md


def test_bench_writes_the_block_and_the_report_shows_it(tmp_path):
    import json

    import _report_toy as R
    from cbench.cli import main

    cases = R.write_cases(tmp_path / "cases")
    assert main(R.bench_args(cases, tmp_path / "bench")) in (0, None)
    doc = json.loads((tmp_path / "bench" / "results.json").read_text())
    schemas.check(doc, "results")
    tiers = doc["results"]["discrimination"]
    assert tiers == by_tier(doc["results"]["auroc"], doc["results"]["model_kind"], MAIN_CASES,
                            doc["inputs"]["methods"])
    assert "random" not in next(iter(tiers.values()))["methods"]
    assert "## Discrimination per tier" in (tmp_path / "bench" / "table.md").read_text()
    try:
        main(["report", str(tmp_path / "bench"), "--html", str(tmp_path / "html")])
    except SystemExit as exc:
        assert exc.code in (0, None)
    html = (tmp_path / "html" / "index.html").read_text()
    assert "Discrimination per tier" in html and 'id="discrimination"' in html
