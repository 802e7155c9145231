"""Every model has a word-level tokenizer (tokenizer.json) that load_model() attaches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from cbench.artifacts.model import read_model_artifact
from cbench.errors import ArtifactError
from cbench.artifacts.tokenizer import build_tokenizer, token_strings
from hub_helpers import write_tiny_artifact

RELEASES = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"


def test_released_v1_model_gets_a_tokenizer_built_from_meta():
    art = read_model_artifact(RELEASES / "case-3" / "v1.0.0")
    assert not (art.path / "tokenizer.json").exists()  # v1 predates tokenizer.json
    model = art.load_model()
    tokens = model.to_tokens("x a b")
    vocab = art.meta["input_tokens"]
    assert tokens.tolist() == [[vocab.index("BOS"), vocab.index("x"), vocab.index("a"), vocab.index("b")]]
    assert model.to_str_tokens("x a b") == ["BOS", "x", "a", "b"]
    assert model.to_str_tokens(tokens[0]) == ["BOS", "x", "a", "b"]
    assert model.to_tokens("x a b", prepend_bos=False).tolist() == [tokens[0, 1:].tolist()]
    assert model(tokens).shape[:2] == (1, 4)
    # a batch pads with the case's PAD token
    batch = model.to_tokens(["x a", "a b c"])
    assert batch[0, -1].item() == vocab.index("PAD")


def test_numbers_in_the_vocabulary_become_strings():
    art = read_model_artifact(RELEASES / "case-8" / "v1.0.0")
    assert any(isinstance(t, int) for t in art.meta["input_tokens"])  # case 8 mixes strings and ints
    model = art.load_model()
    assert model.to_str_tokens("0 10 3") == ["BOS", "0", "10", "3"]
    assert model.to_tokens("0 10 3")[0, 2].item() == art.meta["input_tokens"].index(10)
    assert token_strings(["BOS", 0, 10, "PAD"]) == ["BOS", "0", "10", "PAD"]


def test_written_artifacts_carry_tokenizer_json_in_the_manifest(tmp_path):
    art = write_tiny_artifact(tmp_path / "a")
    path = art.path / "tokenizer.json"
    assert path.is_file() and "tokenizer.json" in art.meta["files"]
    tok = Tokenizer.from_file(str(path))
    assert tok.encode("x a b").ids == [0, 4, 1, 2]
    assert json.loads(path.read_text()) == json.loads(build_tokenizer(art.meta).to_str())
    assert art.load_model().to_str_tokens("c x") == ["BOS", "c", "x"]


def test_ambiguous_vocabularies_are_refused():
    with pytest.raises(ArtifactError, match="same string"):
        token_strings(["BOS", 1, "1"])
    with pytest.raises(ArtifactError, match="whitespace"):
        token_strings(["BOS", "a b"])
    with pytest.raises(ArtifactError, match="BOS token"):
        build_tokenizer({"input_tokens": ["a", "b"], "bos_token": "BOS"})


def test_transformers_autotokenizer_loads_a_written_artifact(tmp_path):
    """tokenizer_config.json names the fast tokenizer class, so AutoTokenizer needs no model type
    (config.json is TransformerLens's, not a transformers model config)."""
    transformers = pytest.importorskip("transformers")
    art = write_tiny_artifact(tmp_path / "a")
    assert "tokenizer_config.json" in art.meta["files"]
    tok = transformers.AutoTokenizer.from_pretrained(str(art.path))
    ids = tok("x a b")["input_ids"]
    assert ids == [0, 4, 1, 2]  # BOS prepended, as tokenizer.json's own encode
    assert tok.convert_ids_to_tokens(ids) == ["BOS", "x", "a", "b"]
    assert tok.bos_token == "BOS"
