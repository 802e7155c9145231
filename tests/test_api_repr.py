"""Issue 47: printing a result object prints one short paragraph (under 500 characters), not the
13,000-17,000 characters of its documents; the full data stays in its fields."""

from __future__ import annotations

from pathlib import Path

import pytest

import cbench
from cbench.api import results as R


def test_a_real_discovery_score_and_evaluation_print_short(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))  # a fresh home: pulled from the embedded hub
    for var in ("HF_HUB_OFFLINE", "CBENCH_ENDPOINT", "CBENCH_HUB"):
        monkeypatch.delenv(var, raising=False)
    found = cbench.discover("case-3", "random", n_examples=8)
    scored = cbench.score("case-3", found, n_examples=8)
    evaluated = cbench.evaluate(found, n_examples=8)
    pulled = cbench.pull("case-3")
    for obj in (found, scored, evaluated, pulled):
        text = repr(obj)
        assert len(text) < 500 and "\n" not in text, text
        assert text.startswith(type(obj).__name__ + "(")
    assert len(str(found.document)) > 5000  # what printing used to show; still there in the fields
    assert f"edge AUROC {scored.edge_auroc:.3f}" in repr(scored)
    assert "case 3, random: 110 edges scored" in repr(found)
    assert f"CPR {evaluated.cpr:.3f}" in repr(evaluated)


def test_results_with_huge_fields_are_cut_to_the_limit():
    many = {f"e{i}": float(i) for i in range(20000)}
    bench = R.BenchResult(out=Path("/x" * 200), cases=tuple(str(i) for i in range(300)),
                          methods=tuple(f"method-{i}" for i in range(60)),
                          auroc={str(c): {f"method-{i}": 0.5 for i in range(60)} for c in range(300)},
                          auroc_promoted={}, failures={}, table="t" * 10000, document={"x": many})
    text = repr(bench)
    assert len(text) <= R.REPR_LIMIT and text.endswith("...)") and "300 cases x 60 methods" in text
    val = R.ValidationResult(valid=True, files=(), document={"x": many})
    assert repr(val) == "ValidationResult(valid: 0 files)"


@pytest.mark.parametrize("value,shown", [(float("nan"), "n/a"), (None, "n/a"), (0.98765, "0.988")])
def test_missing_figures_print_as_na(value, shown):
    assert R._fmt(value) == shown
