"""Base/source input pairs for discovery and ablation: from the counterfactuals dataset (pulled
when not cached), or -- only when asked for -- sampled deterministically from the model's meta.json.

:class:`TaskData` holds ``base`` and ``source`` token ids ``[N, P]`` (BOS at position 0),
optional ``labels`` (``[N, P]``: class indices for categorical tasks, floats for numerical;
``None`` means "use the clean model's outputs"), ``valid`` positions ``[N, P]`` (position 0 and
padding excluded), and where the data came from (``split``, ``dataset``, ``revision``).
``answers`` (``[N, 2]``, optional): each pair's (correct, wrong) answer token ids at the scored
position, for tasks that have them (IOI: the indirect object and the subject), which MIB's
logit-difference metric reads.

Sampling (:func:`sample_pairs`): token ids drawn uniformly from ``input_tokens`` minus BOS and
PAD with ``numpy.random.default_rng(seed)``; every sequence has length ``max_seq_len`` (BOS
included), so base and source align position by position — the convention InterpBench's
resample ablations use. Labels are left to the clean model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.kinds import pair_loader
from cbench.tasks.labels import none_class_of


@dataclass
class TaskData:
    base: torch.Tensor
    source: torch.Tensor
    labels: torch.Tensor | None
    valid: torch.Tensor
    task_type: str
    split: str = "sampled"
    dataset: str | None = None
    revision: str | None = None
    info: dict = field(default_factory=dict)
    answers: torch.Tensor | None = None  # [N, 2] (correct, wrong) token ids, or None

    @property
    def n_examples(self) -> int:
        return int(self.base.shape[0])

    def subset(self, n: int) -> "TaskData":
        n = min(int(n), self.n_examples)
        return TaskData(self.base[:n], self.source[:n], None if self.labels is None else self.labels[:n],
                        self.valid[:n], self.task_type, self.split, self.dataset, self.revision, dict(self.info),
                        None if self.answers is None else self.answers[:n])

    def data_block(self) -> dict:
        """The ``data`` block of an edge-scores document."""
        out: dict[str, Any] = {"split": self.split, "n_examples": self.n_examples}
        if self.dataset:
            out["dataset"] = self.dataset
        if self.revision:
            out["revision"] = self.revision
        out.update(self.info)
        return out


def _token_ids(meta: Mapping) -> tuple[int, int | None, list[int]]:
    tokens = list(meta["input_tokens"])
    bos = tokens.index(meta["bos_token"])
    pad = tokens.index(meta["pad_token"]) if meta.get("pad_token") is not None else None
    usable = [i for i in range(len(tokens)) if i != bos and i != pad]
    if not usable:
        raise UsageError("the model's vocabulary has no tokens besides BOS/PAD to sample inputs from")
    return bos, pad, usable


def sample_pairs(meta: Mapping, n_examples: int = 100, seed: int = 0, seq_len: int | None = None) -> TaskData:
    """``n_examples`` deterministic (base, source) pairs from meta.json's vocabulary."""
    if n_examples < 1:
        raise UsageError(f"n_examples must be at least 1 (got {n_examples})")
    bos, _pad, usable = _token_ids(meta)
    P = int(seq_len or meta["max_seq_len"])
    rng = np.random.default_rng(seed)
    ids = np.asarray(usable)
    base = ids[rng.integers(0, len(ids), size=(n_examples, P - 1))]
    source = ids[rng.integers(0, len(ids), size=(n_examples, P - 1))]
    col = np.full((n_examples, 1), bos)
    base = torch.as_tensor(np.concatenate([col, base], 1), dtype=torch.long)
    source = torch.as_tensor(np.concatenate([col, source], 1), dtype=torch.long)
    valid = torch.ones(n_examples, P, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, str(meta["task_type"]), split="sampled",
                    info={"origin": "sampled", "seed": int(seed)})


def _encode(seq: Sequence, tokens: list[str], where: str) -> list[int]:
    index = {t: i for i, t in enumerate(tokens)}
    out = []
    for t in seq:
        if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
            out.append(int(t))
        elif str(t) in index:
            out.append(index[str(t)])
        else:
            raise UsageError(f"{where}: token {t!r} is not in the model's vocabulary")
    return out


def _ids(seq: Sequence, n_vocab: int, row: int, dataset: str | None) -> list[int]:
    """Token ids of one input of a counterfactual row, each an integer id of the model's vocabulary."""
    out = []
    for x in seq:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= int(x) < n_vocab:
            where = f"{dataset}: " if dataset else ""
            raise UsageError(f"{where}counterfactual row {row}: token id {x!r} is not in the model's vocabulary "
                             f"(ids 0 to {n_vocab - 1})")
        out.append(int(x))
    return out


def from_rows(rows: Sequence[Mapping], meta: Mapping, split: str, dataset: str | None = None,
              revision: str | None = None, limit: int | None = None,
              id_lengths: Sequence[tuple[int, int]] | None = None) -> TaskData:
    """TaskData from ``cbench/counterfactuals`` rows: ``base_ids``/``source_ids`` (BOS first) and
    ``base_label`` (one label per position after BOS).

    Rows are right-padded to one width (with PAD, else BOS); padded positions are not valid. A
    source may be longer than its base (configs built with ``source_lengths: same-or-longer``):
    the base is padded to the source's length, as the labels were computed. Causal models cannot
    see the padding of earlier positions; a bidirectional model can, so for one only the rows of
    the most common length are kept -- unless its build verified it exact on PAD-padded inputs
    (meta.json ``exactness.pad_exact``, compiled Tracr models), which keeps every row.

    ``limit``: only the first ``limit`` rows kept are converted (and their tokens checked); the
    padded width is still that of every kept row, so the result equals the first ``limit`` rows
    of the whole conversion (:meth:`TaskData.subset`) at a fraction of the cost. ``id_lengths``:
    the lengths of every row's ``base_ids`` and ``source_ids`` when every row has both (then only
    the rows converted are read from ``rows``: :func:`from_table`)."""
    tokens = list(meta["input_tokens"])
    bos, pad, _ = _token_ids(meta)
    lengths = []  # (base, source) lengths with BOS, of every row
    for i in range(len(rows)):
        if id_lengths is not None:  # given: every row has base_ids and source_ids
            lb, ls = id_lengths[i]
        else:
            r = rows[i]
            b, s = r.get("base_ids"), r.get("source_ids")
            extra = 0
            if b is None or s is None:
                b, s, extra = r.get("base_tokens"), r.get("source_tokens"), 1  # BOS comes with the encoding
                if b is None or s is None:
                    raise UsageError(f"counterfactual row {i} has no base/source inputs")
            lb, ls = len(b) + extra, len(s) + extra
        if ls < lb:
            raise UsageError(f"counterfactual row {i}: the source is shorter than the base "
                             f"({ls - 1} vs {lb - 1} tokens); a source must be at least as long")
        if ls > lb and pad is None:
            raise UsageError(f"counterfactual row {i}: the source is longer than the base and the model has no "
                             "PAD token to pad the base with")
        lengths.append((lb, ls))
    if not lengths:
        raise UsageError("the counterfactual dataset split is empty")
    keep = list(range(len(lengths)))
    pad_exact = bool((meta.get("exactness") or {}).get("pad_exact"))
    if not meta.get("causal", True) and not pad_exact:
        same_len = [lb if lb == ls else -1 for lb, ls in lengths]
        same = set(same_len) - {-1}
        if not same:
            raise UsageError("every counterfactual row pairs a base with a longer source, and this bidirectional "
                             "model is not known to be exact on PAD-padded inputs")
        common = max(same, key=lambda n: (same_len.count(n), n))
        keep = [i for i, n in enumerate(same_len) if n == common]
    P = max(lengths[i][1] for i in keep)
    bases, sources, labels = [], [], []
    for i in (keep[:limit] if limit else keep):
        r = rows[i]
        b, s = r.get("base_ids"), r.get("source_ids")
        if b is None or s is None:
            b = [bos] + _encode(r["base_tokens"], tokens, f"row {i}")
            s = [bos] + _encode(r["source_tokens"], tokens, f"row {i}")
        bases.append(_ids(b, len(tokens), i, dataset))
        sources.append(_ids(s, len(tokens), i, dataset))
        labels.append(r.get("base_label"))
    fill = pad if pad is not None else bos

    def padded(x):
        return x + [fill] * (P - len(x))

    base = torch.tensor([padded(b) for b in bases], dtype=torch.long)
    source = torch.tensor([padded(s) for s in sources], dtype=torch.long)
    valid = torch.tensor([[j < len(b) for j in range(P)] for b in bases], dtype=torch.bool)
    valid[:, 0] = False
    lab = None
    # a null label is RASP None: a class of its own for models trained with one (meta none_class),
    # else a position without a label
    none_class = none_class_of(meta) if meta.get("task_type") == "categorical" else None
    if all(isinstance(l, (list, tuple)) for l in labels):
        arr = torch.full((len(bases), P), float("nan"))
        for i, l in enumerate(labels):
            for j, v in enumerate(l[: P - 1]):
                if v is None and none_class is None:
                    valid[i, j + 1] = False
                else:
                    arr[i, j + 1] = float(none_class if v is None else v)
        if meta.get("task_type") == "categorical":
            lab = torch.nan_to_num(arr, nan=-1).long()
        else:
            lab = torch.nan_to_num(arr, nan=0.0)
    return TaskData(base, source, lab, valid, str(meta["task_type"]), split=split, dataset=dataset,
                    revision=revision, info={"origin": "counterfactuals"})


def from_table(table, meta: Mapping, split: str, dataset: str | None = None, revision: str | None = None,
               limit: int | None = None) -> TaskData:
    """:func:`from_rows` of the rows of a pyarrow table, the same TaskData: where every row has
    ``base_ids`` and ``source_ids`` their lengths are read column-wise and only the rows converted
    become Python objects (a case's split has thousands of rows, the bench reads 100)."""
    import pyarrow.compute as pc

    names = set(table.column_names)
    if not {"base_ids", "source_ids"} <= names or table.column("base_ids").null_count \
            or table.column("source_ids").null_count:
        return from_rows(table.to_pylist(), meta, split, dataset=dataset, revision=revision, limit=limit)
    lb = (pc.list_value_length(table.column("base_ids")).to_numpy() + 0).tolist()
    ls = (pc.list_value_length(table.column("source_ids")).to_numpy() + 0).tolist()
    return from_rows(_LazyRows(table), meta, split, dataset=dataset, revision=revision, limit=limit,
                     id_lengths=list(zip(lb, ls)))


class _LazyRows:
    """The rows of a pyarrow table as a sequence of dicts, each converted when read."""

    def __init__(self, table):
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> dict:
        return self.table.slice(i, 1).to_pylist()[0]


def load_task_data(case: str, meta: Mapping, split: str = "validation", n_examples: int | None = None,
                   seed: int = 0, use_dataset: bool = True, offline: bool | None = None) -> TaskData:
    """The case's counterfactual pairs for ``split`` (``cbench/counterfactuals``, config
    ``case-<id>``, at meta.json's ``dataset_revision`` when set), pulled from the hub when it is
    not cached; ``n_examples`` caps the number of pairs. Sampled pairs (deterministic in ``seed``)
    only when asked for (``use_dataset=False``, the CLI's ``--sampled``), never as a fallback:
    what data a command uses must not depend on what happens to be cached. A dataset that cannot
    be had raises one clear error that names ``--sampled``."""
    loader = pair_loader(meta)  # a registered task kind (cbench.tasks.kinds)
    if loader is not None:  # a registered task kind (IOI: cbench/ioi's rows)
        return loader(meta, split, n_examples, seed, use_dataset, offline)
    if not use_dataset:
        return sample_pairs(meta, n_examples or 100, seed)
    return counterfactual_rows("counterfactuals", f"case-{case}", meta, split, n_examples, meta.get("dataset_revision"),
                               offline, f"case {case}")


def counterfactual_rows(dataset: str, config: str, meta: Mapping, split: str, n_examples: int | None,
                        revision: str | None, offline: bool | None, subject: str) -> TaskData:
    """The rows of one config and split of a cbench counterfactuals dataset (``cbench/<dataset>``)
    as TaskData, pulled from the hub when not cached; ``n_examples`` caps the pairs. Every way it
    can fail is one clear error naming ``subject`` and the ``--sampled`` way out."""
    from cbench.errors import CbenchError
    from cbench.hub.loading import config_snapshot, config_table, dataset_splits, open_dataset

    advice = "pass --sampled to use input pairs sampled from meta.json instead"
    try:  # the card and this config's files only (the whole snapshot when it is cached)
        snap = config_snapshot(dataset, config, revision, offline=offline)
    except CbenchError as exc:
        raise type(exc)(f"{subject}: the {dataset} dataset could not be loaded ({exc}); {advice}") from None
    splits = dataset_splits(snap.path).get(config)
    if splits is None:
        raise UsageError(f"{subject}: cbench/{dataset}@{snap.tag or snap.sha[:12]} has no config {config}; "
                         f"{advice}")
    if split not in splits:
        raise UsageError(f"--split {split!r}: cbench/{dataset} config {config} has the splits "
                         f"{', '.join(splits)}")
    try:
        table = config_table(snap, config, split)
        rows = open_dataset(snap, config, split=split).to_list() if table is None else None
    except CbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets' own errors: one line, the same advice
        raise UsageError(f"{subject}: the {dataset} dataset could not be read "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); {advice}") from None
    if table is not None:
        return from_table(table, meta, split, dataset=f"cbench/{dataset}", revision=revision, limit=n_examples)
    return from_rows(rows, meta, split, dataset=f"cbench/{dataset}", revision=revision, limit=n_examples)
