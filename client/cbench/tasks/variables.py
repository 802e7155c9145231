"""The variables tier's task: a two-level high-level model and its counterfactual data.

A variables model (``meta.json`` ``high_level.kind: "variables"``) computes, at every position
after BOS, one output from a few **causal variables**, each a lookup table over some input tokens:

* ``high_level.inputs``: the positions (1-based, after BOS) of the tokens the program reads;
* ``high_level.variables``: ``[{"name", "reads": [input index, ...], "table": [...]}]``, the
  variable's value for each combination of the read tokens' values (a token's value is its index
  in the vocabulary, BOS excluded; combinations in mixed radix, the first read most significant);
* ``high_level.output``: ``{"reads": [variable name, ...], "table": [...]}``, the output class
  for each combination of the read variables' values (variables range over ``0..n_values-1``).

Interchanging variable ``X`` from a source into a base gives the output computed from the base's
values with ``X`` taken from the source (:func:`interchange_output`). Every split's pairs are drawn
deterministically, like the stress tier's, in two **counterfactual datasets** per variable:
``random`` (base and source uniform and independent) and ``differs`` (the source's value of the
variable differs from the base's). Labels are the same at every position after BOS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.tasks.data import TaskData

#: the seed of each split's rows (``seed`` from the caller is added, 0 by default)
SPLIT_SEEDS = {"train": 21, "validation": 22, "test": 23}
#: the counterfactual datasets every variable has
DATASETS = ("random", "differs")


@dataclasses.dataclass(frozen=True)
class HighLevel:
    vocab_size: int
    inputs: tuple[int, ...]
    variables: dict[str, tuple[tuple[int, ...], np.ndarray, int]]  # name -> (reads, table, n_values)
    out_reads: tuple[str, ...]
    out_table: np.ndarray

    @classmethod
    def from_meta(cls, meta: Mapping) -> HighLevel:
        hl = meta.get("high_level") or {}
        if hl.get("kind") != "variables":
            raise UsageError("the model is not a variables model (meta.json high_level.kind)")
        V = len(meta["output_classes"])
        try:
            inputs = tuple(int(p) for p in hl["inputs"])
            variables = {}
            for v in hl["variables"]:
                table = np.asarray(v["table"], dtype=np.int64)
                variables[str(v["name"])] = (tuple(int(r) for r in v["reads"]), table, int(v["n_values"]))
            out = hl["output"]
            out_reads = tuple(str(r) for r in out["reads"])
            out_table = np.asarray(out["table"], dtype=np.int64)
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"meta.json high_level of a variables model is malformed ({e})") from None
        return cls(V, inputs, variables, out_reads, out_table)

    def values(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        """Each variable's value per row of ``tokens`` ``[N, P]`` (BOS at 0)."""
        x = tokens[:, list(self.inputs)] - 1  # token values 0..V-1
        out = {}
        for name, (reads, table, _n) in self.variables.items():
            idx = np.zeros(len(tokens), dtype=np.int64)
            for r in reads:
                idx = idx * self.vocab_size + x[:, r]
            out[name] = table[idx]
        return out

    def output(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        idx = None
        for r in self.out_reads:
            n = self.variables[r][2]
            idx = values[r] if idx is None else idx * n + values[r]
        return self.out_table[idx]

    def interchange_output(self, base: np.ndarray, source: np.ndarray, variable: str | None) -> np.ndarray:
        vb = self.values(base)
        if variable is not None:
            vb[variable] = self.values(source)[variable]
        return self.output(vb)


def _draw(meta: Mapping, n: int, rng: np.random.Generator) -> np.ndarray:
    V = len(meta["output_classes"])
    P = int(meta["max_seq_len"])
    toks = rng.integers(1, V + 1, size=(n, P - 1))
    return np.concatenate([np.zeros((n, 1), dtype=np.int64), toks], 1)


def _task(meta: Mapping, base: np.ndarray, source: np.ndarray, labels: np.ndarray, split: str, info: dict) -> TaskData:
    N, P = base.shape
    lab = torch.as_tensor(np.repeat(labels[:, None], P, 1), dtype=torch.long)
    valid = torch.ones(N, P, dtype=torch.bool)
    valid[:, 0] = False
    lab[:, 0] = -1
    return TaskData(torch.as_tensor(base), torch.as_tensor(source), lab, valid, "categorical", split=split,
                    dataset=None, info=info)


def _seed(split: str, seed: int, salt: int = 0) -> int:
    return SPLIT_SEEDS.get(split, 24) * 1_000_003 + int(seed) + 7919 * salt


def variables_pairs(meta: Mapping, split: str = "validation", n_examples: int | None = None,
                    seed: int = 0) -> TaskData:
    """Uniform pairs of ``split`` labelled with the base's output (the model's task)."""
    hl = HighLevel.from_meta(meta)
    n = int(n_examples or 1000)
    rng = np.random.default_rng(_seed(split, seed))
    base, source = _draw(meta, n, rng), _draw(meta, n, rng)
    return _task(meta, base, source, hl.interchange_output(base, source, None), split,
                 {"origin": "variables", "split": split})


def variable_pairs(meta: Mapping, variable: str, dataset: str, split: str, n_examples: int,
                   seed: int = 0) -> tuple[TaskData, torch.Tensor]:
    """Pairs of one counterfactual ``dataset`` for ``variable`` labelled with the interchange
    output, and the mask of valid positions whose label the interchange changes."""
    hl = HighLevel.from_meta(meta)
    if variable not in hl.variables:
        raise UsageError(f"the model has no variable {variable!r} (it has: {', '.join(hl.variables)})")
    if dataset not in DATASETS:
        raise UsageError(f"unknown counterfactual dataset {dataset!r} (one of {', '.join(DATASETS)})")
    n = int(n_examples)
    rng = np.random.default_rng(_seed(split, seed, 1 + DATASETS.index(dataset) + 10 * sorted(hl.variables).index(variable)))
    base, source = _draw(meta, n, rng), _draw(meta, n, rng)
    if dataset == "differs":  # redraw sources until the variable's value differs from the base's
        for _ in range(1000):
            same = hl.values(base)[variable] == hl.values(source)[variable]
            if not same.any():
                break
            source[same] = _draw(meta, int(same.sum()), rng)
    labels = hl.interchange_output(base, source, variable)
    plain = hl.interchange_output(base, source, None)
    data = _task(meta, base, source, labels, split, {"origin": "variables", "split": split, "variable": variable,
                                                    "counterfactual_dataset": dataset})
    changed = torch.as_tensor(np.repeat((labels != plain)[:, None], base.shape[1], 1)) & data.valid
    return data, changed


def kind_loader(meta: Mapping, split: str, n_examples: int | None, seed: int, use_dataset: bool,
                offline: bool | None) -> TaskData:
    return variables_pairs(meta, split, n_examples, seed)


def check_tables(hl: HighLevel, names: Sequence[str] | None = None) -> None:
    """Every table entry in range (a builder's check)."""
    for name, (_reads, table, n) in hl.variables.items():
        if table.min() < 0 or table.max() >= n:
            raise UsageError(f"variable {name}: table values outside 0..{n - 1}")
    if hl.out_table.min() < 0 or hl.out_table.max() >= hl.vocab_size:
        raise UsageError("output table values outside the output classes")
