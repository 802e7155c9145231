"""Pairs for the stress tier's models (``meta.json`` ``high_level.kind: "stress"``).

A stress model reads every token sequence of its length (its mechanism is defined on all of
them), so its pairs are uniform (base, source) sequences drawn deterministically per split: the
same rows for every user, and disjoint streams for validation and test. They are released as the
dataset ``cbench/stress-counterfactuals`` (one config per model, the model's answers as labels),
which the commands read; ``--sampled`` draws fresh pairs instead.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from cbench.tasks.data import TaskData, sample_pairs

#: the seed of each split's rows (``seed`` from the caller is added, 0 by default)
SPLIT_SEEDS = {"train": 11, "validation": 12, "test": 13}


def stress_pairs(meta: Mapping, split: str = "validation", n_examples: int | None = None, seed: int = 0) -> TaskData:
    """``n_examples`` (default 1,000) pairs of ``split`` for a stress model."""
    data = sample_pairs(meta, int(n_examples or 1000), seed=SPLIT_SEEDS.get(split, 14) * 1_000_003 + int(seed))
    return dataclasses.replace(data, split=split, dataset=None, info={"origin": "stress", "split": split})


DATASET = "stress-counterfactuals"


def kind_loader(meta: Mapping, split: str, n_examples: int | None, seed: int, use_dataset: bool,
                 offline: bool | None) -> TaskData:
    """The model's rows of ``cbench/stress-counterfactuals`` (config: the model's name), or,
    with ``use_dataset=False`` (``--sampled``), pairs sampled in ``seed``."""
    if not use_dataset:
        return sample_pairs(meta, int(n_examples or 100), seed=seed)
    from cbench.tasks.data import counterfactual_rows

    name = str(meta["case"])
    return counterfactual_rows(DATASET, name, meta, split, n_examples, meta.get("dataset_revision"), offline, name)

