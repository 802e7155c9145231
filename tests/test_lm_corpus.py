"""The small language model's corpus, tokenizer and held-out prompts (cbench_builders.lm): the
same seed gives the same text, the task answers are one token each, a greater-than prompt ends in
its century and its answer is later, held-out IOI prompts use name pairs the corpus never pairs,
and the written pairs are in the EAP-IG library's layout with equal clean/corrupted lengths."""

from __future__ import annotations

import csv
import random

import pytest

pytest.importorskip("tokenizers")

from cbench_builders.lm import corpus as C  # noqa: E402
from cbench_builders.lm.train import answer_ids, write_pairs  # noqa: E402


@pytest.fixture(scope="module")
def docs_and_tok():
    docs = C.corpus(3000, seed=0)
    return docs, C.train_tokenizer(docs, 1024)


def test_the_corpus_is_deterministic_and_holds_both_tasks(docs_and_tok):
    docs, _ = docs_and_tok
    assert C.corpus(3000, seed=0) == docs and C.corpus(3000, seed=1) != docs
    assert sum(" gave a " in d or " handed a " in d for d in docs) > 1000
    assert sum(" lasted from the year " in d for d in docs) > 1000


def test_answers_are_one_token_and_years_split_in_two_digit_pieces(docs_and_tok):
    _, tok = docs_and_tok
    prompts = C.held_out_prompts("ioi", 50) + C.held_out_prompts("greater-than", 50)
    good, bad = answer_ids(tok, prompts)
    assert len(good) == len(bad) == 100 and all(g != b for g, b in zip(good, bad))
    gt = C.held_out_prompts("greater-than", 50)
    for p in gt:
        assert tok.tokenize(p.clean)[-1] == p.clean[-2:]  # the century is the prompt's last token
        year = int(p.clean.split("from the year ")[1][2:4])
        assert int(p.correct) > year > int(p.incorrect)


def test_held_out_ioi_pairs_are_never_training_pairs():
    train, test = C._split_pairs(random.Random(1))
    assert not {frozenset(p) for p in train} & {frozenset(p) for p in test}
    for p in C.held_out_prompts("ioi", 100):
        assert frozenset((p.correct.strip(), p.incorrect.strip())) in {frozenset(q) for q in test}
        assert p.correct.strip() in p.clean and p.correct.strip() not in p.corrupted


def test_pairs_are_written_in_the_eap_ig_layout(docs_and_tok, tmp_path):
    _, tok = docs_and_tok
    n = write_pairs(tmp_path / "ioi.csv", tok, C.held_out_prompts("ioi", 40))
    rows = list(csv.DictReader(open(tmp_path / "ioi.csv")))
    assert len(rows) == n >= 30 and list(rows[0]) == ["clean", "corrupted", "correct_idx", "incorrect_idx"]
    for r in rows:
        assert len(tok(r["clean"])["input_ids"]) == len(tok(r["corrupted"])["input_ids"])
        assert tok.decode([int(r["correct_idx"])]).strip() in r["clean"]
