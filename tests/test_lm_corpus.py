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


def test_every_two_digit_piece_is_one_token_even_when_the_corpus_lacks_it():
    tok = C.train_tokenizer(["When Mary and John went to the store, John gave a drink to Mary."] * 50, 512)
    assert all(len(tok(f"{y:02d}")["input_ids"]) == 1 for y in range(100))


def test_a_trained_model_is_packaged_as_a_releasable_checkpoint_repository(tmp_path):
    """A few steps of the real training on a small corpus, packaged: the repository holds the
    checkpoint at its top level (transformers reads it), the pairs, the gzipped corpus (the same
    bytes on every packaging), the training code and a card with the held-out accuracy; the
    hub's release check accepts it, and refuses it without its weights."""
    import gzip
    import json
    import shutil

    pytest.importorskip("transformers")
    import transformers

    from cbench.hub.publishing import is_checkpoint_repository, release_problems
    from cbench_builders.lm.repository import lm_release_problems, package
    from cbench_builders.lm.train import Recipe, train

    recipe = Recipe(n_layer=1, n_head=2, n_embd=32, n_documents=400, steps=3, batch_size=8, n_held_out=20,
                    eval_every=0)
    report = train(tmp_path / "work", recipe, log=lambda _line: None)
    repo = package(tmp_path / "work", tmp_path / "out", "lm-test")
    assert is_checkpoint_repository(repo) and lm_release_problems(repo) == [] and release_problems(repo) == []
    model = transformers.AutoModelForCausalLM.from_pretrained(repo)
    assert model.config.n_layer == 1 and model.config.vocab_size == json.loads((repo / "config.json").read_text())[
        "vocab_size"]
    assert gzip.decompress((repo / "corpus.txt.gz").read_bytes()).decode() == (tmp_path / "work" / "corpus.txt").read_text()
    first = (repo / "corpus.txt.gz").read_bytes()
    assert package(tmp_path / "work", tmp_path / "out2", "lm-test").joinpath("corpus.txt.gz").read_bytes() == first
    card = (repo / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers") and "no ground-truth circuit" in card
    assert f"{100 * report['held_out']['ioi']['accuracy']:.1f} % of 20" in card
    assert (repo / "training" / "train.py").read_text().startswith('"""Train the small language model')
    shutil.copytree(repo, tmp_path / "broken")
    (tmp_path / "broken" / "model.safetensors").unlink()
    assert any("safetensors" in p for p in release_problems(tmp_path / "broken"))
    (tmp_path / "broken" / "pytorch_model.bin").write_bytes(b"pickle")
    assert "model.safetensors: missing" in lm_release_problems(tmp_path / "broken")
    assert any("pickled weights" in p for p in lm_release_problems(tmp_path / "broken"))  # the shared rules
