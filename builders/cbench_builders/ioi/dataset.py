"""The IOI dataset (``cbench/ioi``) in MIB's row format, with MIB's eight counterfactual types.

A row (MIB, appendix D.1 and Figure 3)::

    prompt, template, metadata {indirect_object, subject, object, place, random_a, random_b,
    random_c}, choices, answerKey, and one nested {prompt, choices, answerKey} per counterfactual.

Roles. The first clause names the indirect object (IO) and the subject (S1) in either order
(ABBA: IO first; BABA: S first, chosen with probability 1/2); the main clause names the subject
again (S2, slot ``{name_C}``). The correct completion is the IO.

Counterfactuals (MIB Table 6; the column names are those of MIB's released data, including its
``ioi`` spelling in the combined ones). With A, B the first-clause names and C the main-clause
name; ``random_a`` replaces the subject and ``random_b`` the IO wherever they occur; ``random_c``
is a third name:

======================================================  ==========================================
``abc_counterfactual``                                  C := random_c (no correct answer: key -1)
``random_names_counterfactual``                         S -> random_a, IO -> random_b
``s1_io_flip_counterfactual``                           swap A and B (IO <-> S1)
``s2_io_flip_counterfactual``                           C := IO (IO <-> S2)
``random_names_s1_ioi_flip_counterfactual``             random names, then IO <-> S1
``random_names_s2_ioi_flip_counterfactual``             random names, then IO <-> S2
``s1_ioi_flip_s2_ioi_flip_counterfactual``              IO <-> S1 and IO <-> S2
``random_names_s1_ioi_flip_s2_ioi_flip_counterfactual`` random names, IO <-> S1 and IO <-> S2
======================================================  ==========================================

The correct completion of every prompt (base or counterfactual, except ABC) is the first-clause
name that the main clause does not repeat. ``choices`` are the prompt's distinct names in an
order shuffled per row (deterministically), and ``answerKey`` is the index of the correct one
(``-1`` for ABC, as in MIB). Choices of a counterfactual are the names of *its* prompt.

Splits use disjoint groups of templates, names, places and objects (see
:mod:`cbench_builders.ioi.vocab`). Generation is deterministic given the seed: each split draws
from its own ``numpy`` generator seeded with ``(seed, split index)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from cbench.errors import UsageError, did_you_mean
from cbench.tasks.ioi_data import COUNTERFACTUALS
from cbench_builders.ioi import vocab as ioi_vocab
from cbench_builders.release.parquet import write_parquet

DEFAULT_SEED = 20231115
DEFAULT_SIZES = {"train": 10_000, "validation": 1_000, "test": 1_000}

# MIB's Table 6: the ABC counterfactual, then the seven the client pairs as same-task interchanges
COUNTERFACTUAL_TYPES = ("abc_counterfactual",) + COUNTERFACTUALS
# short aliases accepted on the command line (the column name without "_counterfactual")
_ALIASES = {c[: -len("_counterfactual")]: c for c in COUNTERFACTUAL_TYPES}

# (random names?, IO<->S1 flip?, IO<->S2 flip?) per type; ABC is handled apart
_TRANSFORMS = {
    "random_names_counterfactual": (True, False, False),
    "s1_io_flip_counterfactual": (False, True, False),
    "s2_io_flip_counterfactual": (False, False, True),
    "random_names_s1_ioi_flip_counterfactual": (True, True, False),
    "random_names_s2_ioi_flip_counterfactual": (True, False, True),
    "s1_ioi_flip_s2_ioi_flip_counterfactual": (False, True, True),
    "random_names_s1_ioi_flip_s2_ioi_flip_counterfactual": (True, True, True),
}

DESCRIPTIONS = {
    "abc_counterfactual": "the main-clause subject replaced by a third name (random_c); no correct answer (answerKey -1)",
    "random_names_counterfactual": "subject and IO replaced by random_a and random_b everywhere",
    "s1_io_flip_counterfactual": "IO and the first mention of the subject swap places in the first clause",
    "s2_io_flip_counterfactual": "the main-clause subject replaced by the IO (the answer becomes the old subject)",
    "random_names_s1_ioi_flip_counterfactual": "random names, then IO <-> S1 flip",
    "random_names_s2_ioi_flip_counterfactual": "random names, then IO <-> S2 flip",
    "s1_ioi_flip_s2_ioi_flip_counterfactual": "IO <-> S1 flip and IO <-> S2 flip",
    "random_names_s1_ioi_flip_s2_ioi_flip_counterfactual": "random names, IO <-> S1 flip and IO <-> S2 flip",
}

VOCAB_FILE = "ioi_vocab.json"


def resolve_counterfactuals(names) -> tuple[str, ...]:
    """Full column names for ``names`` (full names or aliases like ``s2_io_flip``), in the
    canonical order; an unknown name is a UsageError listing the known ones."""
    if names is None:
        return COUNTERFACTUAL_TYPES
    out = set()
    for raw in names:
        n = raw.strip()
        if not n:
            continue
        full = n if n in COUNTERFACTUAL_TYPES else _ALIASES.get(n)
        if full is None:
            raise UsageError(f"unknown IOI counterfactual type {n!r}"
                             + did_you_mean(n, list(COUNTERFACTUAL_TYPES) + list(_ALIASES))
                             + f"; known: {', '.join(_ALIASES)}")
        out.add(full)
    if not out:
        raise UsageError("no IOI counterfactual type given")
    return tuple(c for c in COUNTERFACTUAL_TYPES if c in out)


@dataclass(frozen=True)
class IOISample:
    """The latent choices behind one row (enough to regenerate it)."""

    template: str
    io: str
    s: str
    abba: bool  # True: IO first in the first clause
    place: str
    obj: str
    random_a: str
    random_b: str
    random_c: str


def _render(template: str, a: str, b: str, c: str, place: str, obj: str) -> str:
    return template.format(name_A=a, name_B=b, name_C=c, place=place, object=obj)


def _choices(names: list[str], answer: str | None, rng: np.random.Generator) -> tuple[list[str], int]:
    order = rng.permutation(len(names))
    choices = [names[i] for i in order]
    return choices, (choices.index(answer) if answer is not None else -1)


def _counterfactual(sample: IOISample, kind: str, rng: np.random.Generator) -> dict:
    io, s = sample.io, sample.s
    a, b = (io, s) if sample.abba else (s, io)
    c = s
    if kind == "abc_counterfactual":
        c = sample.random_c
        prompt = _render(sample.template, a, b, c, sample.place, sample.obj)
        choices, key = _choices([io, s, c], None, rng)
        return {"prompt": prompt, "choices": choices, "answerKey": key}
    rand, flip1, flip2 = _TRANSFORMS[kind]
    if rand:
        sub = {s: sample.random_a, io: sample.random_b}
        a, b, c = sub[a], sub[b], sub[c]
    if flip1:
        a, b = b, a
    if flip2:
        # the main clause now names the first-clause name it did not name before
        c = a if c == b else b
    answer = a if c == b else b
    prompt = _render(sample.template, a, b, c, sample.place, sample.obj)
    choices, key = _choices([a, b], answer, rng)
    return {"prompt": prompt, "choices": choices, "answerKey": key}


def _draw(rng: np.random.Generator, split: str) -> IOISample:
    groups = ioi_vocab
    template = groups.TEMPLATES[split][rng.integers(len(groups.TEMPLATES[split]))]
    names = groups.NAMES[split]
    io, s, ra, rb, rc = (names[i] for i in rng.choice(len(names), size=5, replace=False))
    place = groups.PLACES[split][rng.integers(len(groups.PLACES[split]))]
    obj = groups.OBJECTS[split][rng.integers(len(groups.OBJECTS[split]))]
    abba = bool(rng.integers(2))
    return IOISample(template, io, s, abba, place, obj, ra, rb, rc)


def make_row(sample: IOISample, rng: np.random.Generator, counterfactuals=COUNTERFACTUAL_TYPES) -> dict:
    a, b = (sample.io, sample.s) if sample.abba else (sample.s, sample.io)
    choices, key = _choices([sample.io, sample.s], sample.io, rng)
    row = {
        "prompt": _render(sample.template, a, b, sample.s, sample.place, sample.obj),
        "template": sample.template,
        "metadata": {
            "indirect_object": sample.io, "subject": sample.s, "object": sample.obj,
            "place": sample.place, "random_a": sample.random_a, "random_b": sample.random_b,
            "random_c": sample.random_c,
        },
        "choices": choices,
        "answerKey": key,
    }
    for kind in counterfactuals:
        row[kind] = _counterfactual(sample, kind, rng)
    return row


def generate_split(split: str, n: int, seed: int = DEFAULT_SEED,
                   counterfactuals=COUNTERFACTUAL_TYPES) -> list[dict]:
    """``n`` rows of ``split``, deterministic given ``seed``."""
    if split not in ioi_vocab.SPLITS:
        raise UsageError(f"unknown IOI split {split!r}" + did_you_mean(split, ioi_vocab.SPLITS))
    if n < 1:
        raise UsageError(f"IOI split {split} needs at least one row (got {n})")
    rng = np.random.default_rng([int(seed), ioi_vocab.SPLITS.index(split)])
    return [make_row(_draw(rng, split), rng, counterfactuals) for _ in range(n)]


def arrow_schema(counterfactuals=COUNTERFACTUAL_TYPES) -> pa.Schema:
    cf = pa.struct([("prompt", pa.string()), ("choices", pa.list_(pa.string())), ("answerKey", pa.int64())])
    meta = pa.struct([(k, pa.string()) for k in
                      ("indirect_object", "subject", "object", "place", "random_a", "random_b", "random_c")])
    fields = [("prompt", pa.string()), ("template", pa.string()), ("metadata", meta),
              ("choices", pa.list_(pa.string())), ("answerKey", pa.int64())]
    fields += [(k, cf) for k in counterfactuals]
    return pa.schema(fields)


@dataclass
class IOIBuild:
    out_dir: Path
    files: dict[str, Path]  # split -> parquet path
    sizes: dict[str, int]
    counterfactuals: tuple[str, ...]
    seed: int
    vocab_path: Path


def data_file(split: str) -> str:
    return f"data/{split}-00000-of-00001.parquet"


def build_ioi(out_dir: Path, sizes: dict[str, int] | None = None, seed: int = DEFAULT_SEED,
              counterfactuals=None, progress=None) -> IOIBuild:
    """Write the IOI parquet files (``data/<split>-00000-of-00001.parquet``) and
    ``ioi_vocab.json`` under ``out_dir`` (the card is written by the caller)."""
    cfs = resolve_counterfactuals(counterfactuals)
    sizes = dict(DEFAULT_SIZES if sizes is None else sizes)
    unknown = set(sizes) - set(ioi_vocab.SPLITS)
    if unknown:
        raise UsageError(f"unknown IOI split(s) {sorted(unknown)}; splits are {', '.join(ioi_vocab.SPLITS)}")
    out_dir = Path(out_dir)
    vocab = ioi_vocab.build_vocab()
    schema = arrow_schema(cfs)
    meta = {"format": "cbench/ioi/v1", "seed": int(seed), "counterfactuals": list(cfs)}
    files = {}
    for split in ioi_vocab.SPLITS:
        if split not in sizes:
            continue
        rows = generate_split(split, sizes[split], seed, cfs)
        table = pa.Table.from_pylist(rows, schema=schema)
        table = table.replace_schema_metadata({"cbench": json.dumps({**meta, "split": split}, sort_keys=True)})
        path = out_dir / data_file(split)
        write_parquet(table, path)
        files[split] = path
        if progress is not None:
            progress(split)
    vocab_path = out_dir / VOCAB_FILE
    _write_text(vocab_path, json.dumps(vocab, indent=1, sort_keys=True) + "\n")
    return IOIBuild(out_dir, files, {s: sizes[s] for s in files}, cfs, int(seed), vocab_path)


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def correct_answer(prompt_names: tuple[str, str, str]) -> str | None:
    """The correct completion given (A, B, C): the first-clause name C does not repeat
    (None when C repeats neither, as in ABC)."""
    a, b, c = prompt_names
    if c == a and c != b:
        return b
    if c == b and c != a:
        return a
    return None
