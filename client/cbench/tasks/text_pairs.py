"""Counterfactual text pairs for a real model, checked and tokenized into :class:`TaskData`.

A :class:`TextPair` is one row: a ``clean`` and a ``corrupted`` text and, optionally, the
(correct, incorrect) answer at the last position, each either a token id or a string. Every
source of pairs (a user's CSV, JSONL or Hugging Face dataset: :mod:`cbench.tasks.pairs_file`;
MIB's circuit-track datasets: :mod:`cbench.tasks.mib_tasks`) produces them, and
:func:`pairs_to_task_data` checks each for what the methods need, raising one
:class:`~cbench.errors.UsageError` that names the source and the row:

* clean and corrupted tokenize to the same number of tokens (patching aligns them position by
  position, as the EAP-IG library requires);
* an answer given as a string is non-empty and is exactly one token (tokenized as written, no
  special tokens: give ``" Mary"`` with its space when the model sees the space);
* an answer given as an id lies inside the model's vocabulary;
* either every row has both answers or none has.

Texts are tokenized as TransformerLens's ``to_tokens`` with ``prepend_bos=True`` does (the EAP-IG
library's and MIB's ``tokenize_plus``): the tokenizer's BOS first when it has one, then the text's
tokens without special tokens; rows of different lengths are padded on the right, and only real
positions after the BOS count (``valid``), so a metric reads each row at its own last token
(MIB's ``input_length - 1``). ``labels [N, 2]`` holds the (correct, incorrect) ids, or is None
when the rows carry no answers; ``answers`` holds the same, which faithfulness's ``logit_diff``
(and ``--protocol mib``, MIB's metric) reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cbench.errors import UsageError


@dataclass(frozen=True)
class TextPair:
    """One counterfactual pair; ``where`` names it in messages (e.g. ``"row 7"``)."""

    clean: str
    corrupted: str
    correct: int | str | None = None
    incorrect: int | str | None = None
    where: str = ""


def token_ids(tokenizer, text: str, *, bos: bool) -> list[int]:
    """``text``'s token ids without special tokens, the tokenizer's BOS first when ``bos``."""
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    first = getattr(tokenizer, "bos_token_id", None) if bos else None
    return [first] + ids if first is not None else ids


def _answer_id(tokenizer, value, what: str, where: str, vocab_size: int | None) -> int:
    if isinstance(value, bool):
        raise UsageError(f"{where}: {what} must be a token id or a string (got {value!r})")
    if isinstance(value, str):
        if value == "":
            raise UsageError(f"{where}: {what} is empty (an answer is one token)")
        ids = token_ids(tokenizer, value, bos=False)
        if len(ids) != 1:
            raise UsageError(f"{where}: {what} {value!r} is {len(ids)} tokens {ids} (an answer must be one token; "
                             f"give the text as the model sees it, e.g. with its leading space)")
        idx = ids[0]
    else:
        try:
            idx = int(value)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: {what} must be a token id or a string (got {value!r})") from None
        if idx != value:
            raise UsageError(f"{where}: {what} must be a whole token id (got {value!r})")
    if idx < 0 or (vocab_size is not None and idx >= vocab_size):
        raise UsageError(f"{where}: {what} {idx} is outside the vocabulary (0..{(vocab_size or 1) - 1})")
    return idx


def pairs_to_task_data(pairs: Sequence[TextPair], tokenizer, source: str, *, vocab_size: int | None = None,
                       split: str = "file", dataset: str | None = None, info: dict | None = None):
    """The checked, tokenized pairs as :class:`~cbench.tasks.data.TaskData` (``source``: the file
    or dataset named in messages; ``vocab_size``: the model's, for the id check)."""
    import torch

    from cbench.tasks.data import TaskData

    if tokenizer is None:
        raise UsageError("the model has no tokenizer to read text pairs with (save one in its checkpoint directory)")
    if not pairs:
        raise UsageError(f"{source}: no pairs")
    if vocab_size is None:
        vocab_size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    with_answers = [p.correct is not None or p.incorrect is not None for p in pairs]
    base, src, labels = [], [], []
    for p, has in zip(pairs, with_answers):
        where = f"{source}: {p.where}" if p.where else source
        if not isinstance(p.clean, str) or not isinstance(p.corrupted, str) or not p.clean or not p.corrupted:
            raise UsageError(f"{where}: clean and corrupted must be non-empty texts")
        b, s = token_ids(tokenizer, p.clean, bos=True), token_ids(tokenizer, p.corrupted, bos=True)
        if len(b) != len(s):
            raise UsageError(f"{where}: clean has {len(b)} tokens, corrupted {len(s)} (a pair must have the same "
                             f"length): {p.clean!r} / {p.corrupted!r}")
        if has != with_answers[0]:
            raise UsageError(f"{where}: {'has' if has else 'lacks'} answers where the first row "
                             f"{'lacks' if has else 'has'} them (give them on every row or on none)")
        if has:
            if p.correct is None or p.incorrect is None:
                raise UsageError(f"{where}: give both answers (correct and incorrect), not one")
            labels.append((_answer_id(tokenizer, p.correct, "correct", where, vocab_size),
                           _answer_id(tokenizer, p.incorrect, "incorrect", where, vocab_size)))
        for ids, what in ((b, "clean"), (s, "corrupted")):
            bad = [i for i in ids if vocab_size is not None and not 0 <= i < vocab_size]
            if bad:
                raise UsageError(f"{where}: {what} has token {bad[0]} outside the model's vocabulary "
                                 f"(0..{vocab_size - 1}): the tokenizer does not fit the model")
        base.append(b)
        src.append(s)
    P = max(len(b) for b in base)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = 0 if pad is None else pad
    N = len(base)
    tb = torch.full((N, P), pad, dtype=torch.long)
    ts = torch.full((N, P), pad, dtype=torch.long)
    valid = torch.zeros(N, P, dtype=torch.bool)
    for n, (b, s) in enumerate(zip(base, src)):
        tb[n, :len(b)] = torch.tensor(b)
        ts[n, :len(s)] = torch.tensor(s)
        valid[n, 1:len(b)] = True
    lab = torch.tensor(labels, dtype=torch.long) if with_answers[0] else None
    return TaskData(tb, ts, lab, valid, "categorical", split=split, dataset=dataset, info=dict(info or {}),
                    answers=lab)
