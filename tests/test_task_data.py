"""Input pairs for discovery: counterfactual rows and deterministic sampling from meta.json."""

from __future__ import annotations

import pytest
import torch

from cbench.errors import UsageError
from cbench.tasks.data import from_rows, sample_pairs

META = {"input_tokens": ["BOS", "a", "b", "c", "x", "PAD"], "bos_token": "BOS", "pad_token": "PAD",
        "task_type": "numerical", "max_seq_len": 4, "min_seq_len": 2, "causal": True, "output_classes": None}


def test_sampling_is_deterministic_and_never_draws_bos_or_pad():
    a, b = sample_pairs(META, 50, seed=3), sample_pairs(META, 50, seed=3)
    assert torch.equal(a.base, b.base) and torch.equal(a.source, b.source)
    assert not torch.equal(a.base, sample_pairs(META, 50, seed=4).base)
    assert a.base.shape == (50, 4) and (a.base[:, 0] == 0).all() and (a.source[:, 0] == 0).all()
    assert ((a.base[:, 1:] >= 1) & (a.base[:, 1:] <= 4)).all()
    assert a.valid[:, 0].logical_not().all() and a.valid[:, 1:].all()
    assert a.data_block() == {"split": "sampled", "n_examples": 50, "origin": "sampled", "seed": 3}
    with pytest.raises(UsageError):
        sample_pairs(META, 0)


def test_counterfactual_rows_are_padded_and_labelled():
    rows = [{"base_ids": [0, 4, 1, 4], "source_ids": [0, 1, 1, 1], "base_label": [1.0, 0.5, 2 / 3]},
            {"base_ids": [0, 2, 4], "source_ids": [0, 4, 4], "base_label": [0.0, 0.5]}]
    d = from_rows(rows, META, "validation", dataset="cbench/counterfactuals", revision="v1.0.0")
    assert d.base.tolist() == [[0, 4, 1, 4], [0, 2, 4, 5]]  # right-padded with PAD
    assert d.valid.tolist() == [[False, True, True, True], [False, True, True, False]]
    assert d.labels[0].tolist() == pytest.approx([0.0, 1.0, 0.5, 2 / 3])
    assert d.labels[1, 1:3].tolist() == pytest.approx([0.0, 0.5])
    assert d.data_block() == {"split": "validation", "n_examples": 2, "dataset": "cbench/counterfactuals",
                              "revision": "v1.0.0", "origin": "counterfactuals"}
    bidirectional = dict(META, causal=False)
    d2 = from_rows(rows, bidirectional, "validation")  # no padding: the most common length only
    assert d2.n_examples == 1 and d2.base.shape == (1, 4)


def test_longer_sources_pad_the_base_where_the_model_allows_it():
    # issue 14: rows of a length-only program pair a base with a longer source
    rows = [{"base_ids": [0, 4], "source_ids": [0, 1, 2, 3], "base_label": [1.0]},
            {"base_ids": [0, 2, 4], "source_ids": [0, 4, 4], "base_label": [0.0, 0.5]}]
    for meta in (META, dict(META, causal=False, exactness={"pad_exact": True})):
        d = from_rows(rows, meta, "train")
        assert d.base.tolist() == [[0, 4, 5, 5], [0, 2, 4, 5]] and d.source.tolist() == [[0, 1, 2, 3], [0, 4, 4, 5]]
        assert d.valid.tolist() == [[False, True, False, False], [False, True, True, False]]
    # a bidirectional model not known to be exact on padding keeps its same-length rows only
    d = from_rows(rows, dict(META, causal=False), "train")
    assert d.base.tolist() == [[0, 2, 4]]
    with pytest.raises(UsageError, match="not known to be exact on PAD-padded inputs"):
        from_rows(rows[:1], dict(META, causal=False, exactness={"pad_exact": False}), "train")
    with pytest.raises(UsageError, match="row 0: the source is shorter than the base"):
        from_rows([{"base_ids": [0, 1, 2], "source_ids": [0, 1], "base_label": [1.0, 1.0]}], META, "train")
    with pytest.raises(UsageError, match="no\nPAD token|no PAD token"):
        from_rows(rows[:1], dict(META, pad_token=None), "train")


def test_no_silent_fallback_to_sampled_pairs(tmp_path, monkeypatch):
    # issue 14: what data a command used depended on the cache (100 sampled pairs when the
    # counterfactuals dataset was not cached, its validation pairs when it was, with only a note).
    # Now the dataset is pulled, and when it cannot be had the command says so and names --sampled.
    from cbench.errors import CbenchError
    from cbench.tasks.data import load_task_data

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBENCH_HUB", str(tmp_path / "no-hub"))  # nothing cached, nothing to pull from
    monkeypatch.delenv("CBENCH_ENDPOINT", raising=False)
    with pytest.raises(CbenchError, match="--sampled"):
        load_task_data("3", META)
    d = load_task_data("3", META, n_examples=7, seed=2, use_dataset=False)  # --sampled: said in the output
    assert d.data_block() == {"split": "sampled", "n_examples": 7, "origin": "sampled", "seed": 2}


def test_discover_states_sampled_pairs_in_its_output(tmp_path, monkeypatch):
    import json

    from hub_helpers import write_tiny_artifact

    from cbench.cli import main

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBENCH_HUB", str(tmp_path / "no-hub"))
    write_tiny_artifact(tmp_path / "m")
    with pytest.raises(SystemExit) as exc:
        main(["discover", str(tmp_path / "m"), "--method", "random", "--out", str(tmp_path / "a.json"), "-q"])
    assert exc.value.code != 0 and not (tmp_path / "a.json").exists()
    assert main(["discover", str(tmp_path / "m"), "--method", "random", "--sampled", "--n-examples", "5",
                 "--out", str(tmp_path / "b.json"), "-q"]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["data"]["split"] == "sampled"


def test_config_rows_read_from_parquet_equal_the_datasets_library_rows(tmp_path, monkeypatch):
    # the bench reads one config per case straight from its parquet files (no Arrow cache, no
    # parse of the whole card by the datasets library); the rows must be the library's rows
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cbench.errors import CbenchError
    from cbench.hub.cache import Snapshot
    from cbench.hub.loading import config_rows, open_dataset

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    snap_dir = tmp_path / "snap"
    (snap_dir / "case-3").mkdir(parents=True)
    rows = [{"base_ids": [0, 1 + i % 3, 2], "source_ids": [0, 2, 1 + i % 2], "base_label": [0.5 * i, 1.0],
             "high_level_nodes": ["a", "b"]} for i in range(7)]
    schema = pa.schema([("base_ids", pa.list_(pa.int8())), ("source_ids", pa.list_(pa.int8())),
                        ("base_label", pa.list_(pa.float32())), ("high_level_nodes", pa.list_(pa.string()))])
    pq.write_table(pa.Table.from_pylist(rows[:4], schema), snap_dir / "case-3" / "validation-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows[4:], schema), snap_dir / "case-3" / "validation-1.parquet")
    (snap_dir / "README.md").write_text(
        "---\nconfigs:\n- config_name: case-3\n  data_files:\n  - split: validation\n    path:\n"
        "    - case-3/validation-0.parquet\n    - case-3/validation-1.parquet\n---\n# card\n")
    snap = Snapshot("cbench/counterfactuals", "dataset", "0" * 40, snap_dir, tag="v9.0.0")
    fast = config_rows(snap, "case-3", "validation")
    assert fast == open_dataset(snap, "case-3", split="validation").to_list()
    assert [r["base_ids"] for r in fast] == [r["base_ids"] for r in rows]
    assert fast[3]["base_label"] == [1.5, 1.0]
    assert config_rows(snap, "case-3", "train") is None and config_rows(snap, "case-9", "validation") is None
    (snap_dir / "case-3" / "validation-1.parquet").write_bytes(b"PAR1 not parquet")
    with pytest.raises(CbenchError, match="cannot read the dataset"):
        config_rows(snap, "case-3", "validation")


def test_rows_of_a_table_convert_as_the_rows_themselves():
    # the bench reads 100 of a split's thousands of rows: from a pyarrow table only those become
    # Python objects, and the lengths of all (which set the padded width) are read column-wise
    import pyarrow as pa

    from cbench.tasks.data import from_table

    rows = [{"base_ids": [0, 4, 1, 4][: 2 + i % 3], "source_ids": [0, 1, 1, 1, 2][: 2 + i % 3 + (i == 5)],
             "base_label": [1.0, 0.5, 2 / 3][: 1 + i % 3]} for i in range(9)]
    for meta in (META, dict(META, causal=False), dict(META, causal=False, exactness={"pad_exact": True})):
        for limit in (None, 4):
            a = from_rows(rows, meta, "validation", limit=limit)
            b = from_table(pa.Table.from_pylist(rows), meta, "validation", limit=limit)
            assert b.base.shape[1] == 5 or meta is not META
            for x, y in ((a.base, b.base), (a.source, b.source), (a.labels, b.labels), (a.valid, b.valid)):
                assert torch.equal(x, y)
    with pytest.raises(UsageError, match="row 1: the source is shorter than the base"):
        from_table(pa.Table.from_pylist([rows[0], dict(rows[1], source_ids=[0])]), META, "train", limit=1)
    # rows without ids (token strings) take the row-by-row path
    tokens = [{"base_tokens": ["a", "b"], "source_tokens": ["c", "x"], "base_label": [1.0, 0.0]}]
    assert from_table(pa.Table.from_pylist(tokens), META, "train").base.tolist() == [[0, 1, 2]]
