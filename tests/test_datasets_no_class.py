"""Counterfactual labels where the RASP program's value is ``None`` (no class).

Tracr writes ``None`` as an all-zero output, so every class ties and an argmax would make a class
up. The high-level model gives ``NO_CLASS`` there, the dataset writes null, and the client treats
a null label as "no label at this position". Built from the released compiled Tracr models (not
build/): case 13 (the last position has no next token, so no trend) has nulls exactly at its last
position; case 8 (categorical, defined everywhere) and case 3 (numerical) have none.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cbench_builders.datasets import counterfactuals as cf

RELEASES = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
SIZES = {"train": 24, "validation": 6, "test": 6}


def _tracr_dir(tmp_path: Path, *cases: str) -> Path:
    """A --tracr-dir whose tracr-case-<id> entries link to the released v1.0.0 artifacts."""
    d = tmp_path / "tracr"
    d.mkdir()
    for case in cases:
        (d / f"tracr-case-{case}").symlink_to(RELEASES / f"tracr-case-{case}" / "v1.0.0", target_is_directory=True)
    return d


def _case_model(case: str, tmp_path: Path) -> cf.CaseModel:
    from cbench_builders.datasets.build import case_model

    return case_model(case, _tracr_dir(tmp_path, case))


def _build(cm: cf.CaseModel, out: Path) -> cf.CounterfactualsBuild:
    return cf.build_case_counterfactuals(cm, out, sizes=SIZES)


def _rows(build: cf.CounterfactualsBuild) -> dict[str, list[dict]]:
    return {s: pq.read_table(p).to_pylist() for s, p in build.files.items()}


def _labels(row: dict) -> list[list]:
    return [row["base_label"], row["source_label"], *row["interchange_labels"]]


def test_high_level_model_gives_no_class_where_the_program_is_none():
    from cbench_builders.datasets.high_level import NO_CLASS, HighLevelModel

    hl = HighLevelModel.from_artifact(RELEASES / "tracr-case-13" / "v1.0.0")
    tokens = hl.encode([[0, 1, 1, 0], [2, 2, 1, 2]])
    labels = hl.labels(tokens)
    assert labels[:, -1].tolist() == [NO_CLASS, NO_CLASS]
    assert (labels[:, :-1] != NO_CLASS).all()
    assert hl.decode(labels) == [["increasing", "constant", "decreasing", None],
                                 ["constant", "decreasing", "increasing", None]]
    (next_op,) = [op for op in hl.ops if op.startswith("next_token")]
    swapped = hl.to_labels(hl.run_with_interchange(tokens, tokens.flip(0), next_op))
    assert swapped[:, -1].tolist() == [NO_CLASS, NO_CLASS]
    # base 0 1 1 0 with the next tokens of 2 2 1 2 (2 1 2 None)
    assert hl.decode(swapped)[0] == ["increasing", "constant", "increasing", None]


def test_case_13_writes_null_at_its_last_position_and_the_client_skips_it(tmp_path):
    from cbench.tasks.data import from_rows

    cm = _case_model("13", tmp_path)
    build = _build(cm, tmp_path / "a")
    rows = _rows(build)
    schema = pq.read_schema(build.files["train"])
    assert str(schema.field("base_label").type) == "list<element: int8>"
    classes = build.metadata["output_classes"]
    for split, rs in rows.items():
        assert len(rs) == SIZES[split]
        for r in rs:
            n = len(r["base_tokens"])
            assert len(r["interchange_labels"]) == len(r["high_level_nodes"]) == 3  # select, next, trend
            for lab in _labels(r):
                assert len(lab) == n
                assert lab[-1] is None, (split, r["base_tokens"])
                assert all(v is not None and 0 <= v < len(classes) for v in lab[:-1]), (split, r["base_tokens"])
            # the labels that exist are the trend of each token and the next one
            trend = [("increasing" if a < b else "decreasing" if a > b else "constant")
                     for a, b in zip(map(int, r["base_tokens"]), map(int, r["base_tokens"][1:]))]
            assert [classes[v] for v in r["base_label"][:-1]] == trend

    # the client: a null label is no label (valid False), everything else stays valid
    meta = json.loads((RELEASES / "tracr-case-13" / "v1.0.0" / "meta.json").read_text())
    for causal in (True, False):  # causal: every row, padded; bidirectional (case 13): one length
        data = from_rows(rows["train"], {**meta, "causal": causal}, "train")
        kept = [r for r in rows["train"] if causal or len(r["base_ids"]) == data.base.shape[1]]
        assert data.n_examples == len(kept) > 0
        for i, r in enumerate(kept):
            n = len(r["base_tokens"])
            assert data.valid[i].tolist() == [False] + [True] * (n - 1) + [False] * (data.base.shape[1] - n)
            assert data.labels[i, 1:n].tolist() == r["base_label"][:-1]

    # still byte-identical when built again
    again = _build(cm, tmp_path / "b")
    for split in cf.SPLITS:
        assert hashlib.sha256(build.files[split].read_bytes()).digest() == \
            hashlib.sha256(again.files[split].read_bytes()).digest(), split


@pytest.mark.parametrize("case", ["8", "3"])
def test_cases_defined_everywhere_have_no_nulls(tmp_path, case):
    build = _build(_case_model(case, tmp_path), tmp_path / "out")
    for split, rs in _rows(build).items():
        assert len(rs) == SIZES[split]
        for r in rs:
            for lab in _labels(r):
                assert len(lab) == len(r["base_tokens"])
                assert all(v is not None for v in lab), (case, split, r["base_tokens"])
