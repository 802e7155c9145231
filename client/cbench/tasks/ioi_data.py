"""IOI (base, counterfactual) pairs for the IOI model: from the ``cbench/ioi`` dataset's rows.

A row's ``prompt`` is the base and each of its counterfactual columns but ABC (whose base has
no correct answer) a source: one pair per row and column. Prompts are tokenized
with the model's word-level vocabulary (``meta.json`` ``input_tokens`` and the split pattern of
``meta["dataset"]``), BOS first, right-padded with PAD; a counterfactual has its base's length
(names are single words), so base and source align position by position. Only the last real
position (where the answer is predicted) is valid: the IOI model is trained and scored there.

Each pair carries its base prompt's answers (``TaskData.answers``, ``[N, 2]``): the token of the
indirect object (correct) and of the subject (wrong), from the row's ``metadata`` -- MIB's IOI
labels (``dataset.py``: ``[correct_idx, incorrect_idx]`` of the clean prompt for every
counterfactual), which its logit-difference metric reads at the last position. A row without
``metadata`` (an older export) takes them from ``choices``/``answerKey`` instead.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping, Sequence

from cbench.errors import UsageError

if TYPE_CHECKING:  # tasks.data imports torch; `cbench build datasets --help` reads COUNTERFACTUALS
    from cbench.tasks.data import TaskData

DATASET = "ioi"
# the dataset's counterfactual columns that keep the task (the builders' list adds abc_counterfactual,
# whose source has a third name and so no IO answer to interchange)
COUNTERFACTUALS = (
    "random_names_counterfactual",
    "s1_io_flip_counterfactual",
    "s2_io_flip_counterfactual",
    "random_names_s1_ioi_flip_counterfactual",
    "random_names_s2_ioi_flip_counterfactual",
    "s1_ioi_flip_s2_ioi_flip_counterfactual",
    "random_names_s1_ioi_flip_s2_ioi_flip_counterfactual",
)


def is_ioi(meta: Mapping) -> bool:
    return (meta.get("high_level") or {}).get("kind") == "ioi"


def encode(prompt: str, meta: Mapping) -> list[int]:
    """BOS + the word-level token ids of ``prompt`` (an unknown word is a UsageError)."""
    tokens = list(meta["input_tokens"])
    index = {t: i for i, t in enumerate(tokens)}
    pattern = (meta.get("dataset") or {}).get("split_pattern", r"\w+|[^\w\s]")
    ids = [index[meta["bos_token"]]]
    for w in re.findall(pattern, prompt):
        if w not in index:
            raise UsageError(f"the word {w!r} (in {prompt!r}) is not in the IOI model's vocabulary")
        ids.append(index[w])
    return ids


def answer_pair(row: Mapping, meta: Mapping, i: int = 0) -> tuple[int, int]:
    """(correct, wrong) token ids of a row's prompt: the indirect object and the subject."""
    md = row.get("metadata") or {}
    io, subject = md.get("indirect_object"), md.get("subject")
    if io is None or subject is None:
        choices, key = list(row.get("choices") or []), row.get("answerKey")
        if len(choices) != 2 or key not in (0, 1):
            raise UsageError(f"IOI row {i} names no indirect object and subject (metadata) and no two choices "
                             "with an answerKey")
        io, subject = choices[key], choices[1 - key]
    ids = []
    for name in (io, subject):
        enc = encode(str(name), meta)
        if len(enc) != 2:
            raise UsageError(f"IOI row {i}: the answer {name!r} is not a single token of the IOI model")
        ids.append(enc[1])
    return ids[0], ids[1]


def pairs_from_rows(rows: Sequence[Mapping], meta: Mapping, counterfactuals: Sequence[str] = COUNTERFACTUALS,
                    split: str = "validation", dataset: str | None = None, revision: str | None = None) -> TaskData:
    """TaskData of (prompt, counterfactual prompt) pairs, one per row and counterfactual column."""
    import torch

    from cbench.tasks.data import TaskData

    bases, sources, answers = [], [], []
    for i, r in enumerate(rows):
        b = encode(r["prompt"], meta)
        ans = answer_pair(r, meta, i)
        for cf in counterfactuals:
            if cf not in r or r[cf] is None:
                raise UsageError(f"IOI row {i} has no counterfactual column {cf!r}")
            s = encode(r[cf]["prompt"], meta)
            if len(s) == len(b):
                bases.append(b)
                sources.append(s)
                answers.append(ans)
    if not bases:
        raise UsageError("no IOI pairs: the split is empty")
    P = max(len(b) for b in bases)
    pad = list(meta["input_tokens"]).index(meta["pad_token"])
    base = torch.full((len(bases), P), pad, dtype=torch.long)
    source = torch.full((len(bases), P), pad, dtype=torch.long)
    valid = torch.zeros(len(bases), P, dtype=torch.bool)
    for i, (b, s) in enumerate(zip(bases, sources)):
        base[i, : len(b)] = torch.tensor(b)
        source[i, : len(s)] = torch.tensor(s)
        valid[i, len(b) - 1] = True
    return TaskData(base, source, None, valid, "categorical", split=split, dataset=dataset, revision=revision,
                    info={"origin": "ioi counterfactuals", "counterfactuals": list(counterfactuals)},
                    answers=torch.tensor(answers, dtype=torch.long))


def load_ioi_pairs(meta: Mapping, split: str = "validation", n_examples: int | None = None,
                   counterfactuals: Sequence[str] = COUNTERFACTUALS, offline: bool | None = None) -> TaskData:
    """Pairs from the ``cbench/ioi`` dataset (pulled when not cached) at meta.json's
    ``dataset.revision`` when set; ``n_examples`` caps the number of pairs (rows are read in
    order, every counterfactual column of a row before the next row)."""
    from cbench.errors import CbenchError
    from cbench.hub.loading import open_dataset
    from cbench.hub.pull import pull

    revision = (meta.get("dataset") or {}).get("revision")
    try:
        snap = pull(DATASET, revision, repo_type="dataset", offline=offline)
    except CbenchError as exc:
        raise type(exc)(f"the IOI dataset (cbench/ioi) could not be loaded: {exc}") from None
    try:
        ds = open_dataset(snap, split=split)
    except CbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets' own errors: one line
        raise UsageError(f"cbench/ioi has no readable split {split!r} ({type(exc).__name__})") from None
    n_rows = len(ds) if n_examples is None else min(len(ds), -(-int(n_examples) // max(1, len(counterfactuals))))
    rows = [ds[i] for i in range(n_rows)]
    data = pairs_from_rows(rows, meta, counterfactuals, split, dataset="cbench/ioi", revision=revision or snap.sha)
    return data.subset(n_examples) if n_examples else data


def kind_loader(meta: Mapping, split: str, n_examples: int | None, seed: int, use_dataset: bool,
                 offline: bool | None) -> TaskData:
    if not use_dataset:
        raise UsageError("the IOI model has no sampled pairs (random words are not IOI sentences); "
                         "leave out --sampled: its pairs come from the cbench/ioi dataset")
    return load_ioi_pairs(meta, split, n_examples, offline=offline)



def verify_sets(meta: Mapping, n_pairs: int, offline: bool | None = None) -> dict[str, TaskData]:
    """The pair sets ``cbench verify`` checks an IOI model's gates on: the dataset's validation
    split and its test split (``fresh``: templates, names, places and objects of neither the
    validation split nor the rows the model was trained on)."""
    return {"validation": load_ioi_pairs(meta, "validation", n_pairs, offline=offline),
            "fresh": load_ioi_pairs(meta, "test", n_pairs, offline=offline)}
