"""Counterfactual pairs as data, in the EAP-IG library's CSV layout, for a real model.

Columns ``clean`` and ``corrupted`` (texts; each pair must tokenize to the same length, as EAP-IG
requires), optionally ``correct_idx`` and ``incorrect_idx`` (token ids of the right and the wrong
answer at the last position, as in its IOI file: the metric is then the logit difference there)
or ``correct`` and ``incorrect`` (the answers as one-token strings); other columns are ignored.
The reading and the checks are :func:`cbench.tasks.pairs_file.read_pairs_file`'s, which also
reads the same fields as JSONL, Parquet or a saved Hugging Face dataset.
"""

from __future__ import annotations

import os

from cbench.tasks.pairs_file import read_pairs_file


def read_pairs_csv(path: str | os.PathLike, tokenizer, n_examples: int | None = None):
    """The pairs of ``path`` as :class:`~cbench.tasks.data.TaskData` (``labels [N, 2]`` =
    (correct, incorrect) ids when the file has them, else None)."""
    return read_pairs_file(path, tokenizer, n_examples)
