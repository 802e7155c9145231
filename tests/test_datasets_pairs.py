"""Counterfactual pair sampling: partitions, sizes, distinctness, determinism (no Tracr needed)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow.parquet as pq
import pytest

from cbench.errors import UsageError
from cbench_builders.datasets import counterfactuals as cf


def _frac_x(seq):
    out, c = [], 0
    for i, t in enumerate(seq):
        c += t == "x"
        out.append(c / (i + 1))
    return out


def _fake_model(min_len=1, max_len=4, vocab=("a", "b", "c", "x"), seed=7):
    # a stand-in high-level model: frac of "x"; interchanging either node copies the source's value
    return cf.CaseModel(
        case="900", description="fraction of x (test stand-in)", task_type="numerical", vocab=vocab,
        input_tokens=["BOS", *vocab, "PAD"], bos_token="BOS", pad_token="PAD", output_classes=None,
        min_seq_len=min_len, max_seq_len=max_len, label_positions="all", seed=seed,
        ops=[{"name": "is_x", "type": "Map", "components": ["m0"]},
             {"name": "frac_x", "type": "Aggregate", "components": ["a1.h0"]}],
        label_batch=lambda seqs: np.array([_frac_x(q) for q in seqs]),
        interchange_batch=lambda b, s, op: np.array([_frac_x(q) for q in s]))


def test_split_sizes_follow_the_paper():
    assert cf.split_sizes(20_000) == {"train": 20_000, "validation": 4_000, "test": 4_000}
    assert cf.split_sizes(100) == {"train": 100, "validation": 20, "test": 20}
    with pytest.raises(UsageError):
        cf.split_sizes(0)


def test_input_space_enumeration_and_partition_are_disjoint():
    space = cf.InputSpace(4, 1, 4)
    assert space.size == 4 + 16 + 64 + 256
    rows = space.enumerate(2)
    assert rows.shape == (16, 2) and len({tuple(r) for r in rows}) == 16
    part = cf.partition_inputs(space, cf.split_sizes(1000), np.random.default_rng(0))
    assert part.disjoint and part.enumerated
    sets = {s: {tuple(r) for a in sp.by_length.values() for r in a} for s, sp in part.splits.items()}
    assert sum(len(v) for v in sets.values()) == space.size  # every input lands in exactly one split
    assert not (sets["train"] & sets["validation"]) and not (sets["train"] & sets["test"])
    assert not (sets["validation"] & sets["test"])
    # proportional to 1000:200:200
    assert abs(len(sets["train"]) / space.size - 1000 / 1400) < 0.02


def test_pairs_are_distinct_same_length_and_never_identical():
    space = cf.InputSpace(4, 1, 4)
    rng = np.random.default_rng(1)
    part = cf.partition_inputs(space, cf.split_sizes(2000), rng)
    pairs, repeated = cf.draw_pairs(part.splits["train"], 2000, rng)
    assert not repeated and len(pairs) == 2000
    keys = [(tuple(b), tuple(s)) for b, s in pairs]
    assert len(set(keys)) == 2000
    assert all(len(b) == len(s) and b != s for b, s in keys)


def test_same_length_draws_are_unchanged_by_the_longer_sources_option():
    # the pool-indexed draw reproduces the released datasets' pairs (digest of the draw before it)
    import hashlib

    plan = cf.plan_pairs("x", 4, 1, 4, seed=5, sizes=cf.split_sizes(300))
    h = hashlib.sha256()
    for _split, (pairs, _) in plan.drawn.items():
        for b, src in pairs:
            h.update(np.asarray(b).tobytes() + b"|" + np.asarray(src).tobytes() + b";")
    assert h.hexdigest()[:16] == "0d070262db1193a1"


def test_longer_sources_are_as_long_or_longer_distinct_and_never_identical():
    # issue 14: a length-only program needs sources of other lengths (same-length ones carry its answer)
    space = cf.InputSpace(3, 1, 4)
    rng = np.random.default_rng(2)
    part = cf.partition_inputs(space, cf.split_sizes(600), rng)
    pairs, repeated = cf.draw_pairs(part.splits["train"], 600, rng, longer_sources=True)
    assert not repeated and len(pairs) == 600
    keys = [(tuple(b), tuple(s)) for b, s in pairs]
    assert len(set(keys)) == 600 and all(len(s) >= len(b) and b != s for b, s in keys)
    assert sum(len(s) > len(b) for b, s in keys) > 100  # 160: the length-4 bases (81 of 120 inputs) have only length 4
    # the capacity counts the longer inputs: 3 inputs of length 1 and 9 of length 2 give 3*11 + 9*8
    inputs = cf.SplitInputs({1: space.enumerate(1), 2: space.enumerate(2)})
    with pytest.raises(UsageError, match="give only 105 .base != source, source as long or longer"):
        cf.draw_pairs(inputs, 106, np.random.default_rng(0), distinct=True, longer_sources=True)


def test_source_lengths_spec_option_is_checked():
    from types import SimpleNamespace

    def spec(value, causal=False, pad="PAD"):
        return SimpleNamespace(id="900", causal=causal, pad=pad, spec={"dataset": {"source_lengths": value}})

    assert cf.source_lengths(spec("same-or-longer")) == "same-or-longer"
    assert cf.source_lengths(SimpleNamespace(id="1", causal=True, pad=None, spec={})) == "same"
    with pytest.raises(UsageError, match="needs a bidirectional case with a PAD token"):
        cf.source_lengths(spec("same-or-longer", causal=True))
    with pytest.raises(UsageError, match="needs a bidirectional case with a PAD token"):
        cf.source_lengths(spec("same-or-longer", pad=None))
    with pytest.raises(UsageError, match="must be one of same, same-or-longer"):
        cf.source_lengths(spec("longer"))


def test_more_pairs_than_exist_repeat_unless_distinct_is_asked():
    inputs = cf.SplitInputs({2: np.array([[0, 1], [1, 0], [1, 1]], dtype=np.int32)})  # 6 ordered pairs
    pairs, repeated = cf.draw_pairs(inputs, 14, np.random.default_rng(0))
    assert repeated and len(pairs) == 14
    counts = {}
    for b, s in pairs:
        counts[(tuple(b), tuple(s))] = counts.get((tuple(b), tuple(s)), 0) + 1
    assert len(counts) == 6 and set(counts.values()) <= {2, 3}  # every pair used equally often (+ rest)
    with pytest.raises(UsageError, match="asks for 14 distinct pairs but its 3 inputs give only 6"):
        cf.draw_pairs(inputs, 14, np.random.default_rng(0), distinct=True)


def test_tiny_space_falls_back_to_shared_inputs():
    space = cf.InputSpace(2, 1, 1)  # two inputs: one pair each way
    part = cf.partition_inputs(space, cf.split_sizes(10), np.random.default_rng(0))
    assert not part.disjoint
    with pytest.raises(UsageError, match="no .base, source. pair can be formed"):
        cf.partition_inputs(cf.InputSpace(1, 1, 1), cf.split_sizes(10), np.random.default_rng(0))


def test_large_spaces_are_sampled_without_duplicates():
    space = cf.InputSpace(30, 3, 6)  # ~7.5e8 inputs
    assert space.size > cf.ENUMERATE_LIMIT
    plan = cf.plan_pairs("x", 30, 3, 6, seed=3, sizes=cf.split_sizes(500))
    assert not plan.partition.enumerated and plan.partition.disjoint
    all_inputs = [tuple(r) for sp in plan.partition.splits.values() for a in sp.by_length.values() for r in a]
    assert len(all_inputs) == len(set(all_inputs)) == 700
    assert {s: len(p) for s, (p, _) in plan.drawn.items()} == {"train": 500, "validation": 100, "test": 100}


def test_build_writes_compact_deterministic_parquet(tmp_path):
    cm = _fake_model()
    a = cf.build_case_counterfactuals(cm, tmp_path / "a", train_size=300)
    b = cf.build_case_counterfactuals(cm, tmp_path / "b", train_size=300)
    for split in cf.SPLITS:
        assert hashlib.sha256(a.files[split].read_bytes()).digest() == hashlib.sha256(b.files[split].read_bytes()).digest()
    md = pq.ParquetFile(a.files["train"]).metadata
    assert md.num_rows == 300 and md.row_group(0).column(0).compression == "ZSTD"
    # no timestamps: the only key-value metadata is the arrow schema and cbench's own (sorted JSON)
    assert set(md.metadata) == {b"ARROW:schema", b"cbench"}
    assert md.created_by.startswith("parquet-cpp-arrow")
    schema = pq.read_schema(a.files["train"])
    assert str(schema.field("base_ids").type) == "list<element: int8>"
    assert str(schema.field("base_label").type) == "list<element: float>"
    rows = pq.read_table(a.files["train"]).to_pylist()
    for r in rows[:50]:
        assert r["base_ids"][0] == 0 and len(r["base_ids"]) == len(r["base_tokens"]) + 1
        assert [cm.input_tokens[i] for i in r["base_ids"][1:]] == r["base_tokens"]
        assert r["base_label"] == pytest.approx(_frac_x(r["base_tokens"]))
        assert r["high_level_nodes"] == ["is_x", "frac_x"]
        assert r["interchange_labels"][1] == pytest.approx(_frac_x(r["source_tokens"]))
    # splits disjoint in base inputs
    bases = {s: {tuple(r["base_tokens"]) for r in pq.read_table(p).to_pylist()} for s, p in a.files.items()}
    assert not (bases["train"] & bases["validation"]) and not (bases["train"] & bases["test"])
    # another seed gives other pairs
    c = cf.build_case_counterfactuals(_fake_model(seed=8), tmp_path / "c", train_size=300)
    assert c.files["train"].read_bytes() != a.files["train"].read_bytes()
