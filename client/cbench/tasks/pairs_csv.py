"""Counterfactual pairs as data, in the EAP-IG library's CSV layout, for a real model.

Columns ``clean`` and ``corrupted`` (texts; each pair must tokenize to the same length, as EAP-IG
requires), optionally ``correct_idx`` and ``incorrect_idx`` (token ids of the right and the wrong
answer at the last position, as in its IOI file: the metric is then the logit difference there);
other columns are ignored. Texts are tokenized with the model's tokenizer, BOS first when the
tokenizer has one (as TransformerLens's ``to_tokens``); rows of different lengths are padded on
the right, and only real positions count (``valid``).
"""

from __future__ import annotations

import csv
import os

import torch

from cbench.errors import UsageError
from cbench.tasks.data import TaskData


def read_pairs_csv(path: str | os.PathLike, tokenizer, n_examples: int | None = None) -> TaskData:
    """The pairs of ``path`` as :class:`TaskData` (``labels [N, 2]`` = (correct, incorrect) ids
    when the file has them, else None)."""
    if tokenizer is None:
        raise UsageError("the model has no tokenizer to read text pairs with (save one in its checkpoint directory)")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    if not rows or not {"clean", "corrupted"} <= set(rows[0]):
        raise UsageError(f"{path}: needs a header with columns clean and corrupted "
                         f"(and optionally correct_idx, incorrect_idx)")
    if n_examples is not None:
        rows = rows[:n_examples]
    answers = {"correct_idx", "incorrect_idx"} <= set(rows[0])
    bos = getattr(tokenizer, "bos_token_id", None)

    def ids(text: str) -> list[int]:
        out = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        return [bos] + out if bos is not None else out

    base, source, labels = [], [], []
    for i, row in enumerate(rows, start=2):
        b, s = ids(row["clean"]), ids(row["corrupted"])
        if len(b) != len(s):
            raise UsageError(f"{path}, line {i}: clean and corrupted tokenize to {len(b)} and {len(s)} tokens "
                             f"(a pair must have the same length)")
        base.append(b)
        source.append(s)
        if answers:
            try:
                labels.append((int(row["correct_idx"]), int(row["incorrect_idx"])))
            except (TypeError, ValueError):
                raise UsageError(f"{path}, line {i}: correct_idx and incorrect_idx must be token ids") from None
    P = max(len(b) for b in base)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = 0 if pad is None else pad
    N = len(base)
    tb = torch.full((N, P), pad, dtype=torch.long)
    ts = torch.full((N, P), pad, dtype=torch.long)
    valid = torch.zeros(N, P, dtype=torch.bool)
    for n, (b, s) in enumerate(zip(base, source)):
        tb[n, :len(b)] = torch.tensor(b)
        ts[n, :len(s)] = torch.tensor(s)
        valid[n, 1:len(b)] = True
    lab = torch.tensor(labels, dtype=torch.long) if answers else None
    return TaskData(tb, ts, lab, valid, "categorical", split="csv", dataset=os.path.basename(str(path)))
