"""The inputs SIIT trains and validates on, bucketed by sequence length.

* Inputs are sampled from the seed (:func:`make_input_set`), not read from the counterfactuals
  dataset; labels are the Tracr model's outputs (computed by the trainer). An epoch is
  ``pairs_per_epoch`` (base, source) pairs drawn from the training inputs with replacement (the
  paper's 20k-120k inputs are drawn with replacement too when the input space is small). When the
  whole input space is smaller than the train + validation budget, every input is used for both
  training and validation (the model must implement the circuit on the whole space).
* Causal models are trained on sequences of the maximum length only: a causal model's outputs on
  a shorter sequence are exactly the outputs on the same positions of any longer sequence that
  extends it, and so are interchanges between equal-length prefixes. Bidirectional models are
  trained on every length from min to max (each batch has one length; lengths equally weighted).

An :class:`InputSet` may also carry counterfactual sources paired row by row with its bases
(IOI's, :func:`cbench_builders.ioi.model.input_set`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

def task_inputs(input_tokens: list, bos_token, pad_token, seq_len: int, n: int, seed: int) -> torch.Tensor:
    """Up to ``n`` distinct token-id sequences of length ``seq_len`` (plus BOS at position 0).

    Enumerates the whole input space (in a seeded random order) when it has at most ``n``
    members; else samples ``n`` distinct ones by seed.
    """
    ids = [i for i, t in enumerate(input_tokens) if t != bos_token and t != pad_token]
    bos = input_tokens.index(bos_token)
    space = len(ids) ** seq_len
    gen = np.random.default_rng(seed)
    if space <= n:
        grid = np.array(np.meshgrid(*([ids] * seq_len), indexing="ij")).reshape(seq_len, -1).T
        rows = grid[gen.permutation(len(grid))]
    else:
        codes: set[int] = set()
        while len(codes) < n:
            codes.update(int(c) for c in gen.integers(0, space, size=n - len(codes)))
        codes_arr = np.array(sorted(codes), dtype=np.int64)[gen.permutation(len(codes))]
        digits = np.stack([(codes_arr // len(ids) ** k) % len(ids) for k in range(seq_len)], axis=1)
        rows = np.asarray(ids)[digits]
    bos_col = np.full((len(rows), 1), bos, dtype=np.int64)
    return torch.as_tensor(np.concatenate([bos_col, rows], axis=1), dtype=torch.long)


@dataclass
class InputSet:
    """Training and validation inputs, one bucket per sequence length (BOS included in the tensors)."""

    train: dict[int, torch.Tensor]
    val: dict[int, torch.Tensor]
    shared: bool  # True when train and validation are the whole input space
    # counterfactual sources paired row by row with ``train`` / ``val`` (same shapes); None: a
    # source is any input of the same length, drawn independently of the base
    train_sources: dict[int, torch.Tensor] | None = None
    val_sources: dict[int, torch.Tensor] | None = None
    origin: str = "sampled from the seed by cbench_builders.siit.data.make_input_set"

    def describe(self) -> dict:
        return {"lengths": sorted(self.train), "n_train": sum(len(t) for t in self.train.values()),
                "n_val": sum(len(t) for t in self.val.values()), "train_is_val": self.shared,
                "source": self.origin, "paired_sources": self.train_sources is not None}


def length_counts(inputs: dict[int, torch.Tensor], n: int, weighting: str = "equal") -> dict[int, int]:
    """How many of ``n`` pairs each length of ``inputs`` gets: ``equal`` shares (rounded up), or
    ``inputs``: in proportion to each length's number of inputs (rounded up, at least one)."""
    lengths = sorted(inputs)
    if weighting == "equal":
        return {L: math.ceil(n / len(lengths)) for L in lengths}
    total = sum(len(inputs[L]) for L in lengths)
    return {L: max(1, math.ceil(n * len(inputs[L]) / total)) for L in lengths}


def make_input_set(meta: dict, train_size: int, seed: int) -> InputSet:
    """The inputs SIIT trains and validates on (see the module doc for the length rule)."""
    lengths = [int(meta["max_seq_len"])] if meta.get("causal", True) else \
        list(range(int(meta["min_seq_len"]), int(meta["max_seq_len"]) + 1))
    n_val = max(1, train_size // 5)
    per_len_train = math.ceil(train_size / len(lengths))
    per_len_val = math.ceil(n_val / len(lengths))
    train, val, shared_all = {}, {}, True
    for i, L in enumerate(lengths):
        xs = task_inputs(meta["input_tokens"], meta["bos_token"], meta.get("pad_token"), L,
                         per_len_train + per_len_val, seed=seed + 7919 * i)
        if len(xs) >= per_len_train + per_len_val:
            train[L], val[L] = xs[:per_len_train], xs[per_len_train:]
            shared_all = False
        else:  # the whole space of this length is smaller than the budget: use all of it for both
            train[L] = val[L] = xs
    return InputSet(train, val, shared_all)


def draw_weights(labels: dict[int, torch.Tensor], balance: float) -> dict[int, torch.Tensor] | None:
    """Per length, the probability of drawing each input as a base (or source): a mixture of
    ``1 - balance`` uniform and ``balance`` equal per distinct label sequence (each label sequence
    then gets ``balance / n_sequences`` of the draws, shared by its inputs). None when ``balance``
    is 0 (uniform draws, as before). ``labels[L]`` are the inputs' labels ``[N, ...]`` (a case
    whose outputs are rare, such as 124's all-equal inputs, sees them this way at all)."""
    if balance <= 0:
        return None
    out = {}
    for L, y in labels.items():
        flat = y.reshape(len(y), -1)
        _, group, counts = torch.unique(flat, dim=0, return_inverse=True, return_counts=True)
        uniform = torch.full((len(y),), 1.0 / len(y), dtype=torch.float64)
        per_group = 1.0 / (len(counts) * counts.to(torch.float64)[group])
        out[L] = (1.0 - balance) * uniform + balance * per_group
    return out
