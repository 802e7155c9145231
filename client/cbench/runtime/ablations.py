"""Ablated activations: the value every node's output takes where a mask removes it
(resample, mean, zero or optimal ablation), and their rows as the passes read them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from cbench.errors import UsageError
from cbench.runtime.clean_pass import node_outputs
from cbench.runtime.masks import tokens_tensor

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

ABLATIONS = ("resample", "mean", "zero", "optimal")


def ablated_outputs(rt: ModelState, base, source=None, ablation: str = "resample", reference=None,
                    positional: bool = True) -> torch.Tensor:
    """The ablated value of every node's output, broadcastable to ``[F, B, P, D]``.

    ``resample``: node outputs on ``source`` (paired with ``base`` row by row);
    ``mean``: mean node outputs over ``reference`` inputs (``positional=True``: per position,
    needs the same length as ``base``; else also over positions); ``zero``: zeros;
    ``optimal``: the vectors learned for this runtime (:mod:`cbench.runtime.optimal_ablation`).
    """
    base_t = tokens_tensor(rt, base)
    B, P = base_t.shape
    if ablation == "resample":
        if source is None:
            raise UsageError("resample ablation needs source inputs paired with the base inputs")
        src = tokens_tensor(rt, source)
        if src.shape != base_t.shape:
            raise UsageError(f"source inputs have shape {tuple(src.shape)}, base inputs {tuple(base_t.shape)}")
        return node_outputs(rt, src)
    if ablation == "mean":
        ref = tokens_tensor(rt, reference if reference is not None else (source if source is not None else base_t))
        acts = node_outputs(rt, ref)
        if positional:
            if ref.shape[1] < P:
                raise UsageError(f"positional mean ablation needs reference inputs of length >= {P}")
            return acts[:, :, :P].mean(dim=1, keepdim=True)
        return acts.mean(dim=(1, 2), keepdim=True)
    if ablation == "zero":
        return torch.zeros(rt.n_forward, 1, 1, rt.d_model, device=rt.device, dtype=rt.dtype)
    if ablation == "optimal":
        vectors = getattr(rt, "optimal_vectors", None)
        if vectors is None:
            raise UsageError("optimal ablation needs vectors learned for this model first "
                             "(cbench.runtime.optimal_ablation.load_or_learn and use)")
        return vectors[:, None, None, :]
    raise UsageError(f"unknown ablation {ablation!r}; choose one of: {', '.join(ABLATIONS)}")

