"""Task kinds: how a case whose pairs do not come from ``cbench/counterfactuals`` gets its data.

A kind is named by the model's ``meta.json`` (``high_level.kind``, e.g. ``"ioi"``) and registered
here with the ``"module:function"`` that loads its pairs (:func:`register_task_kind`);
:func:`cbench.tasks.data.load_task_data` asks this table before falling back to the
counterfactuals dataset. Targets are imported on first use, so registering costs nothing (no
torch) and this module imports nothing of cbench: ``cbench.tasks`` registers the built-in kinds.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

#: ``loader(meta, split, n_examples, seed, use_dataset, offline) -> TaskData``
PairLoader = Callable[..., Any]

_KINDS: dict[str, str | PairLoader] = {}


def register_task_kind(kind: str, loader: str | PairLoader) -> None:
    """Make ``loader`` (a callable, or ``"module:function"`` imported on first use) give the pairs
    of every model whose ``meta.json`` names ``kind``."""
    _KINDS[str(kind)] = loader


def task_kind(meta: Mapping) -> str | None:
    """The kind a model's ``meta.json`` names (``high_level.kind``), or None."""
    return (meta.get("high_level") or {}).get("kind")


def pair_loader(meta: Mapping) -> PairLoader | None:
    """The registered loader for the model's kind, or None (pairs from the counterfactuals)."""
    target = _KINDS.get(task_kind(meta))
    if isinstance(target, str):
        module, name = target.split(":")
        target = getattr(importlib.import_module(module), name)
    return target
