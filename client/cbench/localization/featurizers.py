"""Featurizers: how a location's hidden vector is turned into the features that are interchanged.

Every featurizer is a :class:`cbench.localization.pyvene_adapter.BasisIntervention` per part of the location:
the span of an orthonormal basis ``Q`` (``k`` columns) is swapped between base and source.

* ``identity`` -- the full vector (``Q`` = the identity; MIB's "Full Vector" baseline);
* ``das`` -- Distributed Alignment Search: ``Q`` learned on the train split by minimising the loss
  between the intervened model's outputs and the interchange labels (cross-entropy for
  categorical tasks, squared error for numerical ones), kept orthonormal by pyvene's rotation layer.
  It starts from the PCA basis, not a random one: from random starts the squared-error loss of
  numerical variables has local minima (on Tracr's case 3 every optimiser tried stalled with
  the variable's direction at 45 degrees to the subspace, IIA ~0.55; from PCA it reaches 1.0);
* ``pca`` -- the top ``k`` principal components of the location's activations on the train
  split's inputs (unsupervised);
* ``random`` -- ``k`` random orthonormal directions (a baseline; seeded).

``k`` defaults to the variable's natural size (the number of residual dimensions Tracr gave it),
capped by the vector's width.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from cbench.errors import UsageError

FEATURIZERS = ("identity", "das", "pca", "random")


@dataclass(frozen=True)
class FeaturizerSpec:
    name: str
    k: int | None = None  # None: the variable's natural size
    steps: int = 64  # DAS optimiser steps (passes over the train pairs in seeded orders, as many as needed)
    lr: float = 0.01
    batch_size: int = 128
    seed: int = 0

    def __post_init__(self):
        if self.name not in FEATURIZERS:
            raise UsageError(f"unknown featurizer {self.name!r} (one of {', '.join(FEATURIZERS)})")
        if self.k is not None and self.k < 1:
            raise UsageError(f"--k must be at least 1 (got {self.k})")
        import math

        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise UsageError(f"--lr must be a finite number above 0 (got {self.lr!r})")

    def hyperparameters(self, k_used: int | None = None) -> dict:
        out = {"k": k_used if k_used is not None else self.k, "seed": self.seed}
        if self.name == "das":
            out.update(steps=self.steps, lr=self.lr, batch_size=self.batch_size)
        if self.name == "identity":
            out = {}
        return out


def _k(spec: FeaturizerSpec, default_k: int, width: int) -> int:
    return max(1, min(int(spec.k if spec.k is not None else default_k), width))


def _pca_basis(acts: torch.Tensor, k: int) -> torch.Tensor:
    x = acts.double()
    x = x - x.mean(0, keepdim=True)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    basis = vh[:k].T.float()  # [m, k]
    if basis.shape[1] < k:  # fewer samples than k: pad with orthonormal completion
        q, _ = torch.linalg.qr(torch.cat([basis, torch.randn(basis.shape[0], k - basis.shape[1], dtype=basis.dtype)], 1))
        basis = q
    return basis


def _activations(model, part, train) -> torch.Tensor:
    """The part's vectors (in its frame's coordinates) on the train inputs, base and source, at
    every real position: ``[n_vectors, m]``."""
    from cbench.localization.pyvene_adapter import collect

    d = train.data
    acts = collect(model, part.site, torch.cat([d.base, d.source], 0))  # [2N, P, width]
    valid = torch.cat([d.valid, d.valid], 0)
    valid[:, 0] = True  # BOS carries no label but is a position the vector exists at
    return acts[valid] @ part.frame(acts.shape[-1])


def fit(model, location, spec: FeaturizerSpec, train, default_k: int, loss_fn=None) -> tuple[list, dict]:
    """Interventions for each part of ``location`` (one :class:`BasisIntervention` each) and a
    ``{"k": ..., "train_s": ...}`` record. ``train`` is a :class:`VariableData` (used by DAS
    and PCA)."""
    from cbench.localization.pyvene_adapter import BasisIntervention

    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(int(spec.seed))
    ivs, ks = [], []
    for part in location.parts:
        width = part.site.width(model)
        frame = part.frame(width)
        m = frame.shape[1]
        if spec.name == "identity":
            ivs.append(BasisIntervention(frame, basis=torch.eye(m)))
            ks.append(m)
            continue
        k = _k(spec, default_k, m)
        ks.append(k)
        if spec.name == "random":
            q, _ = torch.linalg.qr(torch.randn(m, k, generator=gen))
            ivs.append(BasisIntervention(frame, basis=q))
        elif spec.name == "pca":
            ivs.append(BasisIntervention(frame, basis=_pca_basis(_activations(model, part, train), k)))
        else:  # das: starts from the PCA basis, trained below
            iv = BasisIntervention(frame, k=k)
            with torch.no_grad():
                iv.rotate_layer.weight = _pca_basis(_activations(model, part, train), k)
            ivs.append(iv)
    info: dict = {"k": ks[0] if len(ks) == 1 else ks}
    if spec.name == "das":
        info.update(train_das(model, location, ivs, spec, train, loss_fn))
    info["train_s"] = round(time.perf_counter() - t0, 3)
    return ivs, info


def task_loss(logits: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor, task_type: str) -> torch.Tensor:
    """Mean loss over valid positions: cross-entropy (categorical) or squared error (numerical)."""
    if task_type == "categorical":
        lp = torch.log_softmax(logits, -1)
        nll = -lp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return (nll * valid).sum() / valid.sum().clamp(min=1)
    err = (logits[..., 0] - labels) ** 2
    return (err * valid).sum() / valid.sum().clamp(min=1)


def train_das(model, location, ivs, spec: FeaturizerSpec, train, loss_fn=None) -> dict:
    """Train the DAS rotations of ``ivs`` in place (Adam, ``spec.lr``, ``spec.steps`` batches
    drawn from the train pairs epoch by epoch, each epoch in a seeded order). Returns
    ``{"steps", "final_loss"}``."""
    from cbench.localization.pyvene_adapter import intervenable, interchange

    sites = [p.site for p in location.parts]
    iv = intervenable(model, sites, ivs)
    params = [p for x in ivs for p in x.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=spec.lr)
    d = train.data
    N = d.n_examples
    gen = torch.Generator().manual_seed(int(spec.seed))
    loss_fn = loss_fn or task_loss
    steps, last = 0, float("nan")
    while steps < int(spec.steps):
        order = torch.randperm(N, generator=gen)
        for start in range(0, N, int(spec.batch_size)):
            if steps >= int(spec.steps):
                break
            idx = order[start:start + int(spec.batch_size)]
            logits = interchange(iv, sites, d.base[idx], d.source[idx])
            loss = loss_fn(logits, d.labels[idx], d.valid[idx], d.task_type)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            last = float(loss.detach())
    return {"steps": steps, "final_loss": last}


def spec_dict(spec: FeaturizerSpec) -> dict:
    return asdict(spec)
