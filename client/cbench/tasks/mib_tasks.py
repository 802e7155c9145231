"""MIB's circuit-track tasks (IOI, MCQA, arithmetic, ARC) read from their published datasets'
layout, with MIB's preprocessing (``MIB_circuit_track/dataset.py``'s ``HFEAPDataset`` in
hannamw/MIB-circuit-track), as :class:`~cbench.tasks.data.TaskData` for a real model.

The datasets (Hugging Face ``mib-bench/<name>``) and what MIB reads from a row:

========================  ==================  ==================================================
task                      dataset (config)    clean, corrupted, (correct, incorrect) answer
========================  ==================  ==================================================
``ioi``                   ioi                 ``prompt``, ``<cf>.prompt``; ``" " + metadata.indirect_object``,
                                              ``" " + metadata.subject`` (a space prepended);
                                              default ``<cf>`` s2_io_flip_counterfactual
``mcqa``                  copycolors_mcqa     ``prompt``, ``<cf>.prompt``; ``choices.label[answerKey]``,
                          (4_answer_choices)  ``str(<cf>.choices.label[<cf>.answerKey])`` (as
                                              written); default ``<cf>`` symbol_counterfactual
``arithmetic-addition``   arithmetic_addition ``prompt``, ``random_counterfactual.prompt``;
``arithmetic-subtraction`` ..._subtraction    ``str(label)``, ``str(random_counterfactual.label)``
``arc-easy``,             arc_easy,           as mcqa
``arc-challenge``         arc_challenge
========================  ==================  ==================================================

``arithmetic`` means arithmetic-addition and ``arc`` arc-easy; MIB's own spellings
(``arithmetic_addition``, ``arc_easy``, ...) are accepted. Each answer's token is the first of its
tokens (no special tokens). MIB's filter drops a row first: IOI when the indirect object, the
subject and ``random_c`` (each with its space) tokenize to different numbers of tokens; MCQA and
ARC when the correct and the counterfactual answer labels do; arithmetic unless both labels are
one token, the counterfactual and its prompt exist and ``operator`` is ``+`` (addition) or ``-``
(subtraction). Rows keep the dataset's order (MIB does not shuffle); ``n_examples`` takes the
first rows after filtering, as MIB's ``head``. The metric is MIB's ``logit_diff``: logit of the
correct minus the incorrect answer at each prompt's last token (BOS prepended, padding on the
right; :mod:`cbench.tasks.text_pairs`).

One departure, because cbench's methods patch position by position: a row whose clean and
corrupted prompts tokenize to different lengths is dropped too (MIB's code does not check), and
the number dropped is in the data block (``mib_unequal_length``) next to MIB's own filter's count
(``mib_filtered``).

Where the data is read from (no network is needed): ``data_dir`` or ``$CBENCH_MIB_DATA``, a
directory holding one directory per dataset (``ioi``, ``copycolors_mcqa``, ...), each either a
``save_to_disk`` dataset (with its splits) or a downloaded dataset repository
(``huggingface-cli download mib-bench/ioi --repo-type dataset --local-dir DIR/ioi``); else the
Hugging Face cache, as ``datasets.load_dataset("mib-bench/<name>")`` finds it (offline as
``HF_HUB_OFFLINE`` says). Data that is not there is one :class:`~cbench.errors.UsageError`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from cbench.errors import UsageError
from cbench.tasks.text_pairs import TextPair, pairs_to_task_data, token_ids

DATA_ENV = "CBENCH_MIB_DATA"


@dataclass(frozen=True)
class MibTask:
    """One MIB circuit-track task: its dataset, config and MIB's defaults."""

    name: str  #: cbench's name (``ioi``, ``mcqa``, ``arithmetic-addition``, ...)
    dataset: str  #: the dataset's name under ``mib-bench/``
    rule: str  #: how rows are read: ``ioi``, ``choices`` (mcqa, arc) or ``arithmetic``
    counterfactual: str  #: MIB's default counterfactual column
    config: str | None = None  #: the dataset's config (mcqa: 4_answer_choices)
    operator: str | None = None  #: arithmetic: the rows kept (``+`` or ``-``)

    @property
    def hub_name(self) -> str:
        return f"mib-bench/{self.dataset}"


TASKS: dict[str, MibTask] = {t.name: t for t in (
    MibTask("ioi", "ioi", "ioi", "s2_io_flip_counterfactual"),
    MibTask("mcqa", "copycolors_mcqa", "choices", "symbol_counterfactual", config="4_answer_choices"),
    MibTask("arithmetic-addition", "arithmetic_addition", "arithmetic", "random_counterfactual", operator="+"),
    MibTask("arithmetic-subtraction", "arithmetic_subtraction", "arithmetic", "random_counterfactual", operator="-"),
    MibTask("arc-easy", "arc_easy", "choices", "symbol_counterfactual"),
    MibTask("arc-challenge", "arc_challenge", "choices", "symbol_counterfactual"),
)}
ALIASES = {"arithmetic": "arithmetic-addition", "arc": "arc-easy",
           **{t.name.replace("-", "_"): t.name for t in TASKS.values()}}
TASK_NAMES = ("ioi", "mcqa", "arithmetic", "arc")  #: the four, as the command line spells them


def mib_task(name: str) -> MibTask | None:
    """The task called ``name`` (cbench's or MIB's spelling), or None."""
    return TASKS.get(ALIASES.get(name, name))


@dataclass(frozen=True)
class TaskSpec:
    """``NAME[:SPLIT[:COUNTERFACTUAL]]`` as ``--task`` takes it (split default ``train``, MIB's
    for attribution; its evaluation reads ``validation``)."""

    task: MibTask
    split: str = "train"
    counterfactual: str | None = None


def parse_task_spec(spec: str) -> TaskSpec | None:
    """The MIB task ``spec`` names, or None when it names none (then it is a file)."""
    parts = str(spec).split(":")
    task = mib_task(parts[0])
    if task is None or len(parts) > 3:
        return None
    split = parts[1] if len(parts) > 1 and parts[1] else "train"
    cf = parts[2] if len(parts) > 2 and parts[2] else None
    if cf is not None and not cf.endswith("_counterfactual"):
        cf += "_counterfactual"
    return TaskSpec(task, split, cf)


def _first_token(tokenizer, text: str) -> int:
    return token_ids(tokenizer, text, bos=False)[0]


def _n_tokens(tokenizer, text: str) -> int:
    return len(token_ids(tokenizer, text, bos=False))


def _choice_label(block: Mapping) -> str:
    return str(block["choices"]["label"][block["answerKey"]])


def keeps(task: MibTask, row: Mapping, tokenizer, counterfactual: str) -> bool:
    """MIB's filter: whether MIB keeps ``row`` for this tokenizer."""
    if task.rule == "ioi":
        meta = row["metadata"]
        n = {_n_tokens(tokenizer, f" {meta[k]}") for k in ("indirect_object", "subject", "random_c")}
        return len(n) == 1
    if task.rule == "choices":
        return _n_tokens(tokenizer, _choice_label(row)) == _n_tokens(tokenizer, _choice_label(row[counterfactual]))
    cf = row.get(counterfactual)
    return (_n_tokens(tokenizer, str(row["label"])) == 1 and cf is not None and cf.get("prompt") is not None
            and row.get("operator") == task.operator and _n_tokens(tokenizer, str(cf["label"])) == 1)


def row_pair(task: MibTask, row: Mapping, tokenizer, counterfactual: str, where: str) -> TextPair:
    """MIB's ``__getitem__``: (clean, corrupted, [correct id, incorrect id]) of a kept row."""
    cf = row[counterfactual]
    if task.rule == "ioi":
        meta = row["metadata"]
        answers = (f" {meta['indirect_object']}", f" {meta['subject']}")
    elif task.rule == "choices":
        answers = (_choice_label(row), _choice_label(cf))
    else:
        answers = (str(row["label"]), str(cf["label"]))
    correct, incorrect = (_first_token(tokenizer, a) for a in answers)
    return TextPair(row["prompt"], cf["prompt"], correct, incorrect, where)


def _split_of(ds, split: str, where: str):
    from datasets import DatasetDict

    if isinstance(ds, DatasetDict):
        if split not in ds:
            raise UsageError(f"{where} has no split {split!r} (it has {', '.join(sorted(ds))})")
        return ds[split]
    return ds


def load_rows(task: MibTask, split: str = "train", data_dir: str | os.PathLike | None = None) -> list[dict]:
    """The rows of ``task``'s ``split`` from ``data_dir``, ``$CBENCH_MIB_DATA`` or the Hugging Face
    cache (see the module's docstring)."""
    root = data_dir if data_dir is not None else os.environ.get(DATA_ENV) or None
    try:
        import datasets
    except ImportError:  # pragma: no cover - a dependency
        raise UsageError("reading MIB's tasks needs the datasets package (pip install datasets)") from None
    try:
        if root is not None:
            d = Path(root) / task.dataset
            if not d.is_dir():
                raise UsageError(f"MIB's {task.name} data is not in {root}: expected a directory {d} "
                                 f"({task.hub_name}, saved with save_to_disk or downloaded as a dataset repository)")
            if (d / "dataset_dict.json").exists() or (d / "state.json").exists():
                ds = _split_of(datasets.load_from_disk(str(d)), split, str(d))
            else:  # a downloaded dataset repository: datasets converts it in a scratch cache, then it goes
                with tempfile.TemporaryDirectory(prefix="cbench-mib-") as tmp:
                    ds = datasets.load_dataset(str(d), task.config, split=split, cache_dir=tmp)
                    return [dict(r) for r in ds]
        else:
            ds = datasets.load_dataset(task.hub_name, task.config, split=split)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - datasets raises many kinds for data that is not there
        first = (str(e).splitlines() or [""])[0][:200]
        where = f"in {root}" if root is not None else "in the Hugging Face cache"
        raise UsageError(f"MIB's {task.name} data ({task.hub_name}, split {split}) is not readable {where}: "
                         f"{type(e).__name__}: {first} (download it where there is a network, or set "
                         f"{DATA_ENV} to a directory holding {task.dataset}/; docs/real-models.md)") from None
    return [dict(r) for r in ds]


def mib_pairs(task: MibTask, rows: Sequence[Mapping], tokenizer, counterfactual: str | None = None
              ) -> tuple[list[TextPair], int]:
    """MIB's filter and rows as pairs: ``(pairs, number MIB's filter dropped)``; ``where`` is each
    row's number in the split, counted from 1."""
    cf = counterfactual or task.counterfactual
    if rows and cf not in rows[0]:
        have = sorted(k for k in rows[0] if str(k).endswith("_counterfactual"))
        raise UsageError(f"MIB's {task.name} rows have no column {cf!r} (counterfactuals: {', '.join(have) or 'none'})")
    pairs, dropped = [], 0
    for n, row in enumerate(rows, start=1):
        try:
            kept = keeps(task, row, tokenizer, cf)
            pair = row_pair(task, row, tokenizer, cf, f"row {n}") if kept else None
        except (KeyError, TypeError, IndexError) as e:
            raise UsageError(f"MIB's {task.name} data: row {n}: not in MIB's layout "
                             f"({type(e).__name__}: {e})") from None
        if pair is None:
            dropped += 1
        else:
            pairs.append(pair)
    return pairs, dropped


def load_mib_task(spec: str | TaskSpec, tokenizer, n_examples: int | None = None, *,
                  data_dir: str | os.PathLike | None = None, vocab_size: int | None = None):
    """MIB's task ``spec`` (``NAME[:SPLIT[:COUNTERFACTUAL]]`` or a :class:`TaskSpec`) as
    :class:`~cbench.tasks.data.TaskData` for ``tokenizer``'s model."""
    ts = spec if isinstance(spec, TaskSpec) else parse_task_spec(spec)
    if ts is None:
        raise UsageError(f"unknown task {spec!r} (one of {', '.join(TASK_NAMES)}, or a file of pairs)")
    if tokenizer is None:
        raise UsageError("the model has no tokenizer to read MIB's tasks with (save one in its checkpoint directory)")
    task = ts.task
    cf = ts.counterfactual or task.counterfactual
    rows = load_rows(task, ts.split, data_dir)
    pairs, filtered = mib_pairs(task, rows, tokenizer, cf)
    equal = [p for p in pairs
             if len(token_ids(tokenizer, p.clean, bos=True)) == len(token_ids(tokenizer, p.corrupted, bos=True))]
    unequal = len(pairs) - len(equal)
    if n_examples is not None:
        equal = equal[:n_examples]
    if not equal:
        raise UsageError(f"MIB's {task.name} ({ts.split}, {cf}): no row is left for this tokenizer "
                         f"({len(rows)} rows; MIB's filter dropped {filtered}, unequal lengths {unequal})")
    info = {"task": task.name, "counterfactual": cf, "mib_rows": len(rows), "mib_filtered": filtered,
            "mib_unequal_length": unequal}
    return pairs_to_task_data(equal, tokenizer, f"MIB's {task.name}", vocab_size=vocab_size, split=ts.split,
                              dataset=task.hub_name, info=info)
