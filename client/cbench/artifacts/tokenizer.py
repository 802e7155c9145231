"""Each model's tokenizer: a word-level ``tokenizer.json`` (the ``tokenizers`` library's format).

cbench's models read token ids: id ``i`` is ``meta.json``'s ``input_tokens[i]``, id 0 is BOS.
:func:`build_tokenizer` turns that list into a :class:`tokenizers.Tokenizer`:

* model ``WordLevel`` over the vocabulary, as strings (:func:`token_strings`: one convention for
  every case -- a string token stays as it is, a number is written as Python writes it, so case
  8's ``0 .. 10`` become ``"0" .. "10"``); no unknown token, so a word outside the vocabulary is
  an error rather than a silent substitute;
* pre-tokenizer ``WhitespaceSplit`` (inputs are tokens separated by spaces: ``"x a b"``);
* post-processor ``TemplateProcessing`` that prepends BOS, so ``encode("x a b")`` gives
  ``[BOS, x, a, b]`` and a HookedTransformer knows its tokenizer prepends BOS;
* BOS and PAD (when the case has one) registered as special tokens.

The builders write it into every model artifact (``tokenizer.json``, listed in ``meta.json``'s
sha256 manifest), with a ``tokenizer_config.json`` naming ``PreTrainedTokenizerFast`` so that
``transformers.AutoTokenizer.from_pretrained`` loads it (artifacts written before that file existed
load with ``PreTrainedTokenizerFast(tokenizer_file=...)``). :meth:`cbench.artifacts.model.ModelArtifact.tokenizer` reads it, or builds it from
``meta.json`` for artifacts released before it existed (v1 models), and ``load_model()``
attaches it to the HookedTransformer (:func:`cbench.artifacts.transformer_lens_adapter.attach_tokenizer`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from cbench.errors import ArtifactError

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # what transformers' AutoTokenizer reads first


def token_string(token: Any) -> str:
    """The string form of one vocabulary entry (see the module docstring)."""
    if isinstance(token, str):
        return token
    if isinstance(token, bool) or token is None:
        return str(token)
    if isinstance(token, int):
        return str(token)
    if isinstance(token, float) and math.isfinite(token):
        return str(int(token)) if token.is_integer() else repr(token)
    raise ArtifactError(f"vocabulary entry {token!r} is neither a string nor a number")


def token_strings(tokens: Sequence[Any]) -> list[str]:
    """Every vocabulary entry as a string; ArtifactError if two collide or one holds whitespace."""
    out = [token_string(t) for t in tokens]
    seen: dict[str, int] = {}
    for i, s in enumerate(out):
        if not s or any(c.isspace() for c in s):
            raise ArtifactError(f"vocabulary entry {tokens[i]!r} is empty or holds whitespace; a word-level "
                                "tokenizer cannot split inputs into it")
        if s in seen:
            raise ArtifactError(f"vocabulary entries {tokens[seen[s]]!r} and {tokens[i]!r} are the same string "
                                f"{s!r}; token strings must be unique")
        seen[s] = i
    return out


def build_tokenizer(meta: Mapping[str, Any]):
    """A :class:`tokenizers.Tokenizer` for a model-meta document (``input_tokens``, ``bos_token``,
    ``pad_token``, ``max_seq_len``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokens = meta.get("input_tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ArtifactError("meta.json has no input_tokens list; cannot build a tokenizer")
    vocab = token_strings(tokens)
    bos = token_string(meta.get("bos_token", tokens[0]))
    if bos not in vocab:
        raise ArtifactError(f"the BOS token {bos!r} is not in the vocabulary")
    specials = [bos]
    pad = meta.get("pad_token")
    if pad is not None:
        pad = token_string(pad)
        if pad not in vocab:
            raise ArtifactError(f"the PAD token {pad!r} is not in the vocabulary")
        specials.append(pad)
    tok = Tokenizer(models.WordLevel(vocab={s: i for i, s in enumerate(vocab)}, unk_token=None))
    split = (meta.get("dataset") or {}).get("split_pattern") if isinstance(meta.get("dataset"), Mapping) else None
    if split:  # word-level text models (IOI): words and punctuation, as the dataset's vocabulary splits them
        from tokenizers import Regex

        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                     pre_tokenizers.Split(Regex(split), behavior="isolated")])
    else:
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bos_id = vocab.index(bos)
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B:1",
                                                       special_tokens=[(bos, bos_id)])
    tok.add_special_tokens(specials)
    if pad is not None:
        tok.enable_padding(pad_id=vocab.index(pad), pad_token=pad)
    return tok


def tokenizer_json(meta: Mapping[str, Any]) -> str:
    """``tokenizer.json``'s text for a model-meta document (deterministic)."""
    return build_tokenizer(meta).to_str(pretty=True) + "\n"


def tokenizer_config(meta: Mapping[str, Any]) -> dict:
    """``tokenizer_config.json`` for a model-meta document: names the fast tokenizer class, so that
    ``transformers.AutoTokenizer.from_pretrained`` loads ``tokenizer.json`` without a model type,
    with the special tokens and the context length (BOS included)."""
    tokens = meta.get("input_tokens") or []
    doc: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast",
                           "bos_token": token_string(meta.get("bos_token", tokens[0] if tokens else "BOS"))}
    if meta.get("pad_token") is not None:
        doc["pad_token"] = token_string(meta["pad_token"])
    if isinstance(meta.get("max_seq_len"), int):
        doc["model_max_length"] = int(meta["max_seq_len"]) + 1
    doc["clean_up_tokenization_spaces"] = False
    return doc


def write_tokenizer(directory: str | os.PathLike, meta: Mapping[str, Any]) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``; returns the first's path."""
    import json

    path = Path(directory) / TOKENIZER_FILE
    path.write_text(tokenizer_json(meta), encoding="utf-8")
    (Path(directory) / TOKENIZER_CONFIG_FILE).write_text(json.dumps(tokenizer_config(meta), indent=2, sort_keys=True)
                                                         + "\n", encoding="utf-8")
    return path


def read_tokenizer(directory: str | os.PathLike, meta: Mapping[str, Any]):
    """The artifact's ``tokenizer.json`` if it has one, else one built from ``meta``."""
    from tokenizers import Tokenizer

    path = Path(directory) / TOKENIZER_FILE
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - tokenizers raises plain Exceptions
            raise ArtifactError(f"{path}: not a readable tokenizer.json ({exc})") from None
    return build_tokenizer(meta)
