"""The IOI dataset: MIB row format, disjoint groups, single-token names, answer keys, determinism."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from cbench_builders.ioi import dataset as ioi, vocab as ioi_vocab

SIZES = {"train": 300, "validation": 80, "test": 80}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ioi")
    b = ioi.build_ioi(out, SIZES)
    import pyarrow.parquet as pq

    rows = {s: pq.read_table(p).to_pylist() for s, p in b.files.items()}
    return b, rows


def _names_of(prompt: str, template: str) -> tuple[str, str, str]:
    """(A, B, C) recovered from a prompt by matching its template (independent of the builder)."""
    pattern = re.escape(template)
    for slot in ("name_A", "name_B", "name_C", "place", "object"):
        group = r"(?P<%s>\w+)" % slot if slot.startswith("name") else r"(?P<%s>.+?)" % slot
        pattern = pattern.replace(re.escape("{" + slot + "}"), group, 1)
    m = re.fullmatch(pattern, prompt)
    assert m, (prompt, template)
    return m["name_A"], m["name_B"], m["name_C"]


def test_row_format_is_mibs(built):
    b, rows = built
    row = rows["train"][0]
    assert list(row)[:5] == ["prompt", "template", "metadata", "choices", "answerKey"]
    assert set(row["metadata"]) == {"indirect_object", "subject", "object", "place", "random_a", "random_b",
                                    "random_c"}
    for cf in ioi.COUNTERFACTUAL_TYPES:
        assert set(row[cf]) == {"prompt", "choices", "answerKey"}
    assert len(ioi.COUNTERFACTUAL_TYPES) == 8
    assert {s: len(r) for s, r in rows.items()} == SIZES


def test_default_sizes_meet_the_issue():
    assert ioi.DEFAULT_SIZES["train"] >= 10_000
    assert ioi.DEFAULT_SIZES["validation"] >= 1_000 and ioi.DEFAULT_SIZES["test"] >= 1_000
    assert all(len(ioi_vocab.TEMPLATES[s]) >= 5 for s in ioi_vocab.SPLITS)
    assert sum(len(ioi_vocab.TEMPLATES[s]) for s in ioi_vocab.SPLITS) >= 15


def test_names_are_single_tokens_and_every_prompt_is_in_vocab(built):
    b, rows = built
    vocab = json.loads(b.vocab_path.read_text())
    tokens = vocab["tokens"]
    assert tokens[:3] == ["<bos>", "<pad>", "<unk>"] and len(set(tokens)) == len(tokens)
    for name in vocab["name_tokens"]:
        assert re.findall(vocab["split_pattern"], name) == [name]
        assert name in tokens
    index = set(tokens)
    for split, rs in rows.items():
        for row in rs:
            prompts = [row["prompt"]] + [row[c]["prompt"] for c in ioi.COUNTERFACTUAL_TYPES]
            for p in prompts:
                toks = re.findall(vocab["split_pattern"], p)
                assert all(t in index for t in toks), p
            for key in ("indirect_object", "subject", "random_a", "random_b", "random_c"):
                name = row["metadata"][key]
                assert name in vocab["names_by_split"][split]
                ids = ioi_vocab.encode(name, vocab, add_bos=False)
                assert len(ids) == 1 and tokens[ids[0]] == name


def test_groups_are_disjoint_across_splits(built):
    _, rows = built
    seen = {}
    for split, rs in rows.items():
        seen[split] = {
            "template": {r["template"] for r in rs},
            "name": {r["metadata"][k] for r in rs for k in ("indirect_object", "subject", "random_a", "random_b",
                                                             "random_c")},
            "place": {r["metadata"]["place"] for r in rs},
            "object": {r["metadata"]["object"] for r in rs},
        }
    for kind in ("template", "name", "place", "object"):
        for a in ioi_vocab.SPLITS:
            for b_ in ioi_vocab.SPLITS:
                if a < b_:
                    assert not (seen[a][kind] & seen[b_][kind]), (kind, a, b_)
    # and the full groups (not just the sampled ones)
    ioi_vocab.check_groups()


# expected answer of each counterfactual, in terms of the base row's roles (MIB Table 6)
EXPECTED = {
    "random_names_counterfactual": "random_b",
    "s1_io_flip_counterfactual": "indirect_object",
    "s2_io_flip_counterfactual": "subject",
    "random_names_s1_ioi_flip_counterfactual": "random_b",
    "random_names_s2_ioi_flip_counterfactual": "random_a",
    "s1_ioi_flip_s2_ioi_flip_counterfactual": "subject",
    "random_names_s1_ioi_flip_s2_ioi_flip_counterfactual": "random_a",
}


def test_answer_keys_for_every_counterfactual_type(built):
    _, rows = built
    for row in rows["train"][:150] + rows["test"][:50]:
        md = row["metadata"]
        io, s = md["indirect_object"], md["subject"]
        a, b, c = _names_of(row["prompt"], row["template"])
        assert c == s and {a, b} == {io, s}
        assert row["choices"][row["answerKey"]] == io and sorted(row["choices"]) == sorted([io, s])
        # ABC: the main clause names a third name; no correct answer
        abc = row["abc_counterfactual"]
        a2, b2, c2 = _names_of(abc["prompt"], row["template"])
        assert (a2, b2) == (a, b) and c2 == md["random_c"] and c2 not in (a, b)
        assert abc["answerKey"] == -1 and sorted(abc["choices"]) == sorted([io, s, md["random_c"]])
        for cf, role in EXPECTED.items():
            d = row[cf]
            a2, b2, c2 = _names_of(d["prompt"], row["template"])
            want = md[role]
            # the correct completion is the first-clause name the main clause does not repeat
            assert c2 in (a2, b2) and a2 != b2
            assert want == (b2 if c2 == a2 else a2), (cf, d["prompt"])
            assert d["choices"][d["answerKey"]] == want
            assert sorted(d["choices"]) == sorted([a2, b2])
        # the flips keep or swap the first clause as Table 6 says
        s1 = _names_of(row["s1_io_flip_counterfactual"]["prompt"], row["template"])
        assert s1 == (b, a, s)
        s2 = _names_of(row["s2_io_flip_counterfactual"]["prompt"], row["template"])
        assert s2 == (a, b, io)
        both = _names_of(row["s1_ioi_flip_s2_ioi_flip_counterfactual"]["prompt"], row["template"])
        assert both == (b, a, io)
        rn = _names_of(row["random_names_counterfactual"]["prompt"], row["template"])
        sub = {io: md["random_b"], s: md["random_a"]}
        assert rn == (sub[a], sub[b], md["random_a"])


def test_answer_positions_are_not_fixed(built):
    _, rows = built
    keys = {row["answerKey"] for row in rows["train"]}
    assert keys == {0, 1}
    for cf in EXPECTED:
        assert {row[cf]["answerKey"] for row in rows["train"]} == {0, 1}
    # both orders of the first clause occur
    orders = {_names_of(r["prompt"], r["template"])[0] == r["metadata"]["indirect_object"] for r in rows["train"]}
    assert orders == {True, False}


def test_build_is_deterministic(tmp_path, built):
    b, _ = built
    again = ioi.build_ioi(tmp_path, SIZES)
    for split, path in b.files.items():
        assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(again.files[split].read_bytes()).digest()
    assert b.vocab_path.read_bytes() == again.vocab_path.read_bytes()
    other_seed = ioi.build_ioi(tmp_path / "other", SIZES, seed=1)
    assert other_seed.files["train"].read_bytes() != b.files["train"].read_bytes()


def test_subset_of_counterfactuals_and_unknown_type(tmp_path):
    b = ioi.build_ioi(tmp_path, {"train": 5}, counterfactuals=["s2_io_flip", "abc_counterfactual"])
    import pyarrow.parquet as pq

    names = pq.read_schema(b.files["train"]).names
    assert names[5:] == ["abc_counterfactual", "s2_io_flip_counterfactual"]
    from cbench.errors import UsageError

    with pytest.raises(UsageError, match="unknown IOI counterfactual type 's3_io_flip'"):
        ioi.resolve_counterfactuals(["s3_io_flip"])


def test_load_dataset_from_the_directory(tmp_path):
    from cbench_builders.datasets.build import build_datasets

    build_datasets([], ["ioi"], out=tmp_path, ioi_sizes={"train": 40, "validation": 10, "test": 10})
    import datasets

    # a private cache: datasets keys its cache of a local directory on the directory's name and
    # the card's configs only, so two directories named "ioi" would share one cache entry
    ds = datasets.load_dataset(str(tmp_path / "ioi"), cache_dir=str(tmp_path / "hf-cache"))
    assert {s: ds[s].num_rows for s in ds} == {"train": 40, "validation": 10, "test": 10}
    import pyarrow.parquet as pq

    built_rows = pq.read_table(tmp_path / "ioi" / ioi.data_file("validation")).to_pylist()
    assert ds["validation"].to_list() == built_rows
    card = (tmp_path / "ioi" / "README.md").read_text()
    assert "cbench build datasets --datasets ioi --ioi-sizes 40,10,10" in card
    assert "license: mit" in card and "size_categories:" in card
