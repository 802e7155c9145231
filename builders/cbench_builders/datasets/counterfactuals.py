"""Counterfactual (base, source) pairs for a case (``cbench/counterfactuals``, config ``case-<id>``).

A row holds a pair of inputs of the same length (or, for a case whose spec asks for
``"dataset": {"source_lengths": "same-or-longer"}``, a source at least as long as the base), as
token strings and as token ids in the model's vocabulary, the compiled Tracr model's label of the base and of the source, and for every
high-level node (each RASP operation that a model component computes, in the order of
``circuit.json``'s ``high_level.ops``) the label of the base with that node interchanged from
the source. Labels exclude position 0 (BOS). Columns::

    base_tokens, source_tokens       list<string>   (no BOS; str() of each vocab item)
    base_ids, source_ids             list<int8|int16>  (BOS id first, unpadded)
    base_label, source_label         list<int8|int16> class indices | list<float32> values
    interchange_labels               list<list<...>> aligned to high_level_nodes
                                     (categorical: an element is null where the program's
                                     value is None -- the model gives no class there)
    high_level_nodes                 list<string>   (same in every row; also in the card and
                                                     the parquet metadata)

Sampling (deterministic given the case seed):

1. The input space is every sequence of the vocabulary with a length in
   ``[min_seq_len, max_seq_len]``. Up to :data:`ENUMERATE_LIMIT` inputs are enumerated; beyond
   that a pool of distinct inputs is sampled (length chosen in proportion to the number of
   sequences of that length), as large as the number of rows asked for.
2. Within each length the distinct inputs are shuffled and partitioned between the splits in
   proportion to the split sizes, so splits are disjoint in inputs. If some split would get no
   length with two inputs, the space is too small to partition and every split uses all inputs
   (``splits_disjoint`` is false in the metadata).
3. A split's pairs are allotted to lengths in proportion to the split's inputs of that length,
   capped by the number of distinct ordered pairs (base != source) of that length, the surplus
   going to the other lengths. Within a length the pairs are drawn without repetition. If the
   split asks for more pairs than exist, every pair is used equally often and the rest drawn at
   random, unless ``distinct=True``, which makes that a :class:`~cbench.errors.UsageError`.
4. ``source_lengths: same-or-longer`` (bidirectional cases with a PAD token only): a base of
   length L takes its source from the split's inputs of length L or longer, so a program whose
   output depends on the length alone (tracr's ``make_length``) gets interchanges that change
   it. The high-level model runs the base right-padded with PAD to the source's length (compiled
   bidirectional Tracr models are exact on PAD-padded inputs; the build checks it) and the labels
   are its outputs at the base's positions.
"""

from __future__ import annotations

import json

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from cbench.errors import BuildError, UsageError
from cbench_builders.datasets.high_level import NO_CLASS
from cbench_builders.release.parquet import write_parquet

SPLITS = ("train", "validation", "test")
DEFAULT_TRAIN_SIZE = 20_000
ENUMERATE_LIMIT = 500_000
FORMAT = "cbench/counterfactuals/v1"


# --------------------------------------------------------------------------- sizes
def split_sizes(train_size: int, validation_size: int | None = None, test_size: int | None = None) -> dict[str, int]:
    """Train as given; validation 20% of train (InterpBench) unless given; test = validation."""
    if train_size < 1:
        raise UsageError(f"--train-size must be at least 1 (got {train_size})")
    val = validation_size if validation_size is not None else max(1, int(round(0.2 * train_size)))
    test = test_size if test_size is not None else val
    return {"train": int(train_size), "validation": int(val), "test": int(test)}


SOURCE_LENGTHS = ("same", "same-or-longer")


def source_lengths(spec) -> str:
    """The case spec's ``dataset.source_lengths`` (default ``same``), checked against the case."""
    d = spec.spec.get("dataset") if hasattr(spec, "spec") else None
    value = (d or {}).get("source_lengths", "same") if isinstance(d, dict) else "same"
    if value not in SOURCE_LENGTHS:
        raise UsageError(f"case {spec.id}: dataset.source_lengths must be one of {', '.join(SOURCE_LENGTHS)} "
                         f"(got {value!r})")
    if value != "same" and (spec.causal or spec.pad is None):
        raise UsageError(f"case {spec.id}: dataset.source_lengths {value!r} needs a bidirectional case with a PAD "
                         "token (a causal model's prefix of a longer input is a same-length input)")
    return value


def default_train_size(spec) -> int:
    """The case spec's ``dataset.train_size`` or ``training.train_size``, else 20,000."""
    d = spec.spec.get("dataset") if hasattr(spec, "spec") else None
    if isinstance(d, dict) and d.get("train_size"):
        return int(d["train_size"])
    t = getattr(spec, "training", None) or {}
    if t.get("train_size"):
        return int(t["train_size"])
    return DEFAULT_TRAIN_SIZE


# --------------------------------------------------------------------------- the input space
@dataclass(frozen=True)
class InputSpace:
    """Sequences over ``n_vocab`` symbols (vocab indices) with a length in [min_len, max_len]."""

    n_vocab: int
    min_len: int
    max_len: int

    def count(self, length: int) -> int:
        return self.n_vocab ** length

    @property
    def lengths(self) -> range:
        return range(self.min_len, self.max_len + 1)

    @property
    def size(self) -> int:
        return sum(self.count(L) for L in self.lengths)

    def enumerate(self, length: int) -> np.ndarray:
        """Every sequence of ``length`` as rows of vocab indices, in lexicographic order."""
        n = self.count(length)
        idx = np.arange(n, dtype=np.int64)
        out = np.empty((n, length), dtype=np.int32)
        for pos in range(length - 1, -1, -1):
            out[:, pos] = idx % self.n_vocab
            idx //= self.n_vocab
        return out

    def sample(self, n: int, rng: np.random.Generator) -> dict[int, np.ndarray]:
        """About ``n`` distinct sequences (exactly ``min(n, size)``), grouped by length; lengths
        drawn in proportion to how many sequences each has."""
        n = min(n, self.size)
        lengths = np.array(list(self.lengths))
        weights = np.array([float(self.count(L)) for L in self.lengths])
        weights /= weights.sum()
        seen: set[tuple] = set()
        order: list[tuple] = []
        while len(order) < n:
            k = n - len(order)
            lens = rng.choice(lengths, size=k, p=weights)
            digits = rng.integers(self.n_vocab, size=(k, int(lengths.max())))
            for L, row in zip(lens.tolist(), digits.tolist()):
                seq = tuple(row[:L])
                if seq not in seen:
                    seen.add(seq)
                    order.append(seq)
        groups: dict[int, list] = {}
        for seq in order:
            groups.setdefault(len(seq), []).append(seq)
        return {L: np.array(groups[L], dtype=np.int32).reshape(-1, L) for L in sorted(groups)}


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` summing to ``total`` (ties go to the earlier entry)."""
    weights = np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(weights), dtype=np.int64)
    if total <= 0 or weights.sum() <= 0:
        return out
    exact = weights / weights.sum() * total
    out = np.floor(exact).astype(np.int64)
    rest = total - int(out.sum())
    if rest > 0:
        frac = exact - out
        order = sorted(range(len(weights)), key=lambda i: (-frac[i], i))
        for i in order[:rest]:
            out[i] += 1
    return out


def _water_fill(total: int, weights: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` summing to ``total`` without exceeding ``caps``
    (the caller ensures ``caps.sum() >= total``)."""
    alloc = np.zeros(len(weights), dtype=np.int64)
    active = (caps > 0) & (np.asarray(weights) > 0)
    while True:
        remaining = total - int(alloc.sum())
        if remaining <= 0 or not active.any():
            return alloc
        share = _largest_remainder(remaining, np.where(active, weights, 0.0))
        room = caps - alloc
        over = active & (share >= room)
        if not over.any():
            return alloc + share
        alloc[over] = caps[over]
        active &= ~over


@dataclass
class SplitInputs:
    """The distinct inputs of one split, by length (rows of vocab indices)."""

    by_length: dict[int, np.ndarray]

    @property
    def n_inputs(self) -> int:
        return sum(len(a) for a in self.by_length.values())

    def pair_capacity(self) -> int:
        return sum(len(a) * (len(a) - 1) for a in self.by_length.values())


@dataclass
class Partition:
    splits: dict[str, SplitInputs]
    input_space: int
    enumerated: bool
    disjoint: bool


def partition_inputs(space: InputSpace, sizes: dict[str, int], rng: np.random.Generator) -> Partition:
    """Distinct inputs (enumerated or sampled), partitioned between the splits (see module doc)."""
    total = sum(sizes.values())
    S = space.size
    if S <= ENUMERATE_LIMIT:
        groups = {L: space.enumerate(L) for L in space.lengths}
        enumerated = True
    else:
        groups = space.sample(total, rng)
        enumerated = False
    names = [s for s in SPLITS if s in sizes]
    weights = np.array([sizes[s] for s in names], dtype=np.float64)
    parts: dict[str, dict[int, np.ndarray]] = {s: {} for s in names}
    for L in sorted(groups):
        arr = groups[L][rng.permutation(len(groups[L]))]
        counts = _largest_remainder(len(arr), weights)
        start = 0
        for s, c in zip(names, counts):
            parts[s][L] = arr[start:start + c]
            start += c
    splits = {s: SplitInputs({L: a for L, a in parts[s].items() if len(a)}) for s in names}
    disjoint = all(sp.pair_capacity() > 0 for sp in splits.values())
    if not disjoint:
        everything = SplitInputs({L: groups[L] for L in sorted(groups)})
        if everything.pair_capacity() == 0:
            raise UsageError(f"the input space has {S} input(s) and no two of the same length: "
                             "no (base, source) pair can be formed")
        splits = {s: everything for s in names}
    return Partition(splits, S, enumerated, disjoint)


def draw_pairs(inputs: SplitInputs, n: int, rng: np.random.Generator, distinct: bool = False,
               what: str = "split", longer_sources: bool = False) -> tuple[list[tuple[np.ndarray, np.ndarray]], bool]:
    """``n`` (base, source) pairs, base != source, of equal length (or with ``longer_sources`` a
    source of the base's length or longer); returns (pairs, repeated).

    A base of length L draws its source from a pool: the inputs of length L, then (with
    ``longer_sources``) those of every longer length. Pairs are indexed ``b * (pool - 1) + s``
    with the base's own index skipped, so same-length pools give the same draws as always."""
    lengths = sorted(inputs.by_length)
    m = np.array([len(inputs.by_length[L]) for L in lengths], dtype=np.int64)
    pool = np.array([m[i:].sum() if longer_sources else m[i] for i in range(len(lengths))], dtype=np.int64)
    caps = m * (pool - 1)
    capacity = int(caps.sum())
    repeated = n > capacity
    if repeated and distinct:
        same = "same length" if not longer_sources else "source as long or longer"
        raise UsageError(f"{what} asks for {n} distinct pairs but its {int(m.sum())} inputs give only "
                         f"{capacity} (base != source, {same}); lower --train-size or drop --distinct-pairs")
    if repeated:
        alloc = _largest_remainder(n, np.where(caps > 0, m, 0).astype(np.float64))
    else:
        alloc = _water_fill(n, m.astype(np.float64), caps)
    pairs_b: list[np.ndarray] = []
    pairs_s: list[list[np.ndarray]] = []
    for i, (L, mL, pL, cap, k) in enumerate(zip(lengths, m, pool, caps, alloc)):
        if k == 0:
            continue
        arr = inputs.by_length[L]
        pool_rows = [row for Lp in lengths[i:] if longer_sources or Lp == L for row in inputs.by_length[Lp]]
        if k <= cap:
            idx = rng.choice(int(cap), size=int(k), replace=False)
        else:
            full, rest = divmod(int(k), int(cap))
            idx = np.concatenate([np.tile(np.arange(cap), full), rng.choice(int(cap), size=rest, replace=False)])
        b = idx // (pL - 1)
        s = idx % (pL - 1)
        s = s + (s >= b)
        pairs_b.append(arr[b])
        pairs_s.append([pool_rows[j] for j in s])
    # interleave the lengths in one random order
    order_len = np.concatenate([np.full(int(k), i) for i, k in enumerate(alloc) if k > 0]) if n else np.zeros(0, int)
    perm = rng.permutation(len(order_len))
    flat_b = [row for block in pairs_b for row in block]
    flat_s = [row for block in pairs_s for row in block]
    return [(flat_b[i], flat_s[i]) for i in perm], repeated


# --------------------------------------------------------------------------- labels
@dataclass
class CaseModel:
    """What the builder needs from a compiled case: its vocabulary, label encoding and labeler.

    ``label_batch(seqs)`` gets equal-length sequences of vocab items (no BOS) and returns the
    high-level model's labels at positions 1.. as an array ``[n, len]``: class indices into
    ``output_classes``, or ``NO_CLASS`` where the model gives no class (categorical; written as
    null), or values (numerical). ``interchange_batch(bases, sources, op)`` the same for the
    bases with ``op`` taken from the sources.
    """

    case: str
    description: str
    task_type: str
    vocab: tuple
    input_tokens: list
    bos_token: object
    pad_token: object
    output_classes: list | None
    min_seq_len: int
    max_seq_len: int
    label_positions: object
    seed: int
    ops: list[dict]
    label_batch: Callable[[list], np.ndarray]
    interchange_batch: Callable[[list, list, str], np.ndarray]
    tracr_model_sha256: str | None = None

    @property
    def high_level_nodes(self) -> list[str]:
        return [op["name"] for op in self.ops]


def _int_type(n_values: int) -> pa.DataType:
    return pa.int8() if n_values <= 127 else pa.int16() if n_values <= 32767 else pa.int32()


@dataclass
class CounterfactualsBuild:
    case: str
    files: dict[str, Path]
    sizes: dict[str, int]
    metadata: dict
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def data_file(case: str, split: str) -> str:
    return f"case-{case}/{split}-00000-of-00001.parquet"


def _key(v):
    """Dictionary key for vocab items (1, 1.0 and True stay apart)."""
    return (type(v).__name__, v)


class _Encoder:
    """Token ids and the arrow types of the id and label columns."""

    def __init__(self, cm: CaseModel):
        self.cm = cm
        token_id = {_key(t): i for i, t in enumerate(cm.input_tokens)}
        if _key(cm.bos_token) not in token_id:
            raise BuildError(f"case {cm.case}: BOS {cm.bos_token!r} is not in the model's input_tokens")
        self.bos_id = token_id[_key(cm.bos_token)]
        missing = [v for v in cm.vocab if _key(v) not in token_id]
        if missing:
            raise BuildError(f"case {cm.case}: vocab items {missing[:5]} are not in the model's input_tokens")
        self.vocab_ids = np.array([token_id[_key(v)] for v in cm.vocab], dtype=np.int64)
        self.vocab_str = [str(v) for v in cm.vocab]
        self.id_type = _int_type(len(cm.input_tokens))
        if cm.task_type == "categorical":
            if not cm.output_classes:
                raise BuildError(f"case {cm.case}: a categorical case needs output_classes in its meta.json")
            self.label_type = _int_type(len(cm.output_classes))
        elif cm.task_type == "numerical":
            self.label_type = pa.float32()
        else:
            raise BuildError(f"case {cm.case}: unknown task type {cm.task_type!r}")
        self.np_label = np.float32 if cm.task_type == "numerical" else np.int64


def _schema(enc: _Encoder) -> pa.Schema:
    lab = pa.list_(enc.label_type)
    return pa.schema([
        ("base_tokens", pa.list_(pa.string())),
        ("source_tokens", pa.list_(pa.string())),
        ("base_ids", pa.list_(enc.id_type)),
        ("source_ids", pa.list_(enc.id_type)),
        ("base_label", lab),
        ("source_label", lab),
        ("interchange_labels", pa.list_(lab)),
        ("high_level_nodes", pa.list_(pa.string())),
    ])


BATCH = 4096


class _Labeler:
    """Labels in batches of equal-length inputs, each distinct input (and each distinct
    (base, source) pair per node) run once."""

    def __init__(self, cm: CaseModel, enc: _Encoder):
        self.cm, self.enc = cm, enc
        self.calls = 0

    def _check(self, out, n: int, length: int, what: str) -> np.ndarray:
        arr = np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out)
        if arr.shape != (n, length):
            raise BuildError(f"case {self.cm.case}: {what} gave labels of shape {arr.shape}, expected {(n, length)}")
        if self.cm.task_type == "categorical":
            k = len(self.cm.output_classes)
            classes = arr[arr != NO_CLASS]
            if classes.size and (classes.min() < 0 or classes.max() >= k):
                raise BuildError(f"case {self.cm.case}: {what} gave a class index outside 0..{k - 1} "
                                 f"(or {NO_CLASS} for no class)")
        return arr.astype(self.enc.np_label)

    def _rows(self, arr: np.ndarray) -> list[list]:
        """Label rows as lists; ``NO_CLASS`` -> ``None`` (a null element) for categorical tasks."""
        rows = arr.tolist()
        if self.cm.task_type == "categorical" and (arr == NO_CLASS).any():
            rows = [[None if v == NO_CLASS else v for v in row] for row in rows]
        return rows

    def labels(self, keys: list[tuple]) -> dict[tuple, list]:
        """Labels of every distinct input in ``keys`` (tuples of vocab indices)."""
        out: dict[tuple, list] = {}
        by_len: dict[int, list[tuple]] = {}
        for k in dict.fromkeys(keys):
            by_len.setdefault(len(k), []).append(k)
        vocab = self.cm.vocab
        for L, ks in sorted(by_len.items()):
            for i in range(0, len(ks), BATCH):
                chunk = ks[i:i + BATCH]
                self.calls += 1
                arr = self._check(self.cm.label_batch([[vocab[j] for j in k] for k in chunk]), len(chunk), L,
                                  "the high-level model")
                for k, row in zip(chunk, self._rows(arr)):
                    out[k] = row
        return out

    def interchanged(self, pairs: list[tuple[tuple, tuple]], op: str) -> dict[tuple, list]:
        """Interchange labels (at the base's positions) of every distinct pair, batched by the
        (base, source) lengths."""
        out: dict[tuple, list] = {}
        by_len: dict[tuple[int, int], list[tuple]] = {}
        for pr in dict.fromkeys(pairs):
            by_len.setdefault((len(pr[0]), len(pr[1])), []).append(pr)
        vocab = self.cm.vocab
        for (L, _Ls), prs in sorted(by_len.items()):
            for i in range(0, len(prs), BATCH):
                chunk = prs[i:i + BATCH]
                self.calls += 1
                bases = [[vocab[j] for j in b] for b, _ in chunk]
                sources = [[vocab[j] for j in s_] for _, s_ in chunk]
                arr = self._check(self.cm.interchange_batch(bases, sources, op), len(chunk), L,
                                  f"interchanging {op}")
                for pr, row in zip(chunk, self._rows(arr)):
                    out[pr] = row
        return out


@dataclass
class PairPlan:
    """The pairs of every split, drawn before any labelling (so size errors come first)."""

    case: str
    sizes: dict[str, int]
    partition: Partition
    drawn: dict[str, tuple[list, bool]]  # split -> (pairs of vocab-index rows, repeated?)
    distinct: bool
    source_lengths: str = "same"


def plan_pairs(case: str, n_vocab: int, min_len: int, max_len: int, seed: int, sizes: dict[str, int],
               distinct: bool = False, source_lengths: str = "same") -> PairPlan:
    """Partition the inputs and draw every split's pairs (deterministic given ``seed``)."""
    space = InputSpace(int(n_vocab), int(min_len), int(max_len))
    rng = np.random.default_rng([int(seed), 0xCF])
    try:
        part = partition_inputs(space, sizes, rng)
    except UsageError as exc:
        raise UsageError(f"case {case}: {exc}") from None
    drawn: dict[str, tuple[list, bool]] = {}
    for split in SPLITS:
        if split in sizes:
            drawn[split] = draw_pairs(part.splits[split], sizes[split], rng, distinct,
                                      what=f"case {case} {split} split (input space {space.size})",
                                      longer_sources=source_lengths == "same-or-longer")
    return PairPlan(str(case), dict(sizes), part, drawn, bool(distinct), source_lengths)


def plan_for_spec(spec, sizes: dict[str, int], distinct: bool = False) -> PairPlan:
    """:func:`plan_pairs` from a case spec (vocab, lengths, seed, ``dataset.source_lengths``)."""
    return plan_pairs(spec.id, len(spec.vocab), spec.min_seq_len, spec.max_seq_len, spec.seed, sizes, distinct,
                      source_lengths(spec))


def build_case_counterfactuals(cm: CaseModel, out_dir: Path, train_size: int | None = None,
                               sizes: dict[str, int] | None = None, distinct: bool = False,
                               progress: Callable[[int], None] | None = None,
                               plan: PairPlan | None = None) -> CounterfactualsBuild:
    """Generate, label and write ``case-<id>/<split>-00000-of-00001.parquet`` under ``out_dir``."""
    import time

    t0 = time.perf_counter()
    if sizes is None:
        sizes = plan.sizes if plan is not None else split_sizes(
            train_size if train_size is not None else DEFAULT_TRAIN_SIZE)
    if not cm.ops:
        raise BuildError(f"case {cm.case}: circuit.json lists no high-level operation a component computes")
    enc = _Encoder(cm)
    if plan is None:
        plan = plan_pairs(cm.case, len(cm.vocab), cm.min_seq_len, cm.max_seq_len, cm.seed, sizes, distinct)
    part, drawn, distinct = plan.partition, plan.drawn, plan.distinct
    nodes = cm.high_level_nodes
    schema = _schema(enc)
    meta = {
        "format": FORMAT, "case": str(cm.case), "description": cm.description, "task_type": cm.task_type, "high_level_nodes": nodes,
        "input_tokens": [_jsonable(t) for t in cm.input_tokens], "bos_token": _jsonable(cm.bos_token),
        "pad_token": _jsonable(cm.pad_token),
        "output_classes": None if cm.output_classes is None else [_jsonable(c) for c in cm.output_classes],
        "min_seq_len": int(cm.min_seq_len), "max_seq_len": int(cm.max_seq_len),
        "label_positions": cm.label_positions, "seed": int(cm.seed), "input_space": int(part.input_space),
        "enumerated": part.enumerated, "splits_disjoint": part.disjoint,
        "pairs_repeated": {s: bool(drawn[s][1]) for s in drawn}, "distinct_pairs": bool(distinct),
        **({"source_lengths": plan.source_lengths} if plan.source_lengths != "same" else {}),
        "sizes": {s: int(sizes[s]) for s in drawn}, "tracr_model_sha256": cm.tracr_model_sha256,
        "ops": cm.ops,
    }
    labeler = _Labeler(cm, enc)
    files: dict[str, Path] = {}
    for split, (pairs, _rep) in drawn.items():
        keys = [(tuple(b.tolist()), tuple(s_.tolist())) for b, s_ in pairs]
        lab = labeler.labels([k for pr in keys for k in pr])
        ii = [labeler.interchanged(keys, op) for op in nodes]
        ids = enc.vocab_ids
        words = enc.vocab_str
        bos = [enc.bos_id]
        cols = {
            "base_tokens": [[words[i] for i in b] for b, _ in keys],
            "source_tokens": [[words[i] for i in s_] for _, s_ in keys],
            "base_ids": [bos + ids[list(b)].tolist() for b, _ in keys],
            "source_ids": [bos + ids[list(s_)].tolist() for _, s_ in keys],
            "base_label": [lab[b] for b, _ in keys],
            "source_label": [lab[s_] for _, s_ in keys],
            "interchange_labels": [[d[k] for d in ii] for k in keys],
            "high_level_nodes": [nodes] * len(keys),
        }
        table = pa.Table.from_pydict(cols, schema=schema).replace_schema_metadata(
            {"cbench": json.dumps({**meta, "split": split}, sort_keys=True)})
        files[split] = write_parquet(table, Path(out_dir) / data_file(cm.case, split))
        if progress is not None:
            progress(len(keys))
    return CounterfactualsBuild(str(cm.case), files, {s: sizes[s] for s in files}, meta,
                                time.perf_counter() - t0, {"label_calls": labeler.calls})


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    return str(v)
