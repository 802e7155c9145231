"""Featurizers: how a location's hidden vector is turned into the features that are interchanged.

Every featurizer is one pyvene intervention per part of the location
(:mod:`cbench.localization.pyvene_adapter`), fitted on the train split. MIB's five (its section 4
and appendix G) and two baselines:

* ``identity`` -- the full vector (MIB's "Full Vector");
* ``dbm`` -- desiderata-based masking over the standard dimensions: a binary mask over the
  vector's coordinates learned to maximise IIA (``sigmoid(logits / T)`` with the temperature
  ``T`` annealed from 1 to 0.01 over the steps, as MIB's appendix G.4; cross-entropy to the
  interchange labels plus ``MASK_L1`` times the mask's mean; hard ``logits > 0`` once trained);
* ``dbm-pca`` -- the same mask over all principal components of the location's activations on
  the train inputs;
* ``dbm-sae`` -- the same mask over the features of a sparse autoencoder of the location
  (released beside the model, else trained on the train inputs: :mod:`cbench.localization.sae`);
  the base's reconstruction error is kept;
* ``das`` -- Distributed Alignment Search: an orthonormal ``Q`` (``k`` columns) learned by
  minimising the loss between the intervened model's outputs and the interchange labels, kept
  orthonormal by pyvene's rotation layer under torch's orthogonal parametrization. It starts from
  the PCA basis, not a random one: from random starts the squared-error loss of numerical
  variables has local minima (on Tracr's case 3 every optimiser tried stalled with the
  variable's direction at 45 degrees to the subspace, IIA ~0.55; from PCA it reaches 1.0);
* ``pca`` -- the top ``k`` principal components (unsupervised; a baseline);
* ``random`` -- ``k`` random orthonormal directions (a baseline).

``k`` defaults to the variable's natural size (the number of residual dimensions Tracr gave it,
or a variables model's number of values), capped by the vector's width. Every featurizer is
deterministic given ``seed``: :func:`fit` seeds every initialisation, including the global RNG
torch's orthogonal parametrization draws from.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from cbench.errors import UsageError

FEATURIZERS = ("identity", "dbm", "dbm-pca", "dbm-sae", "das", "pca", "random")
#: the featurizers MIB compares, in its order
MIB_FEATURIZERS = ("identity", "dbm", "dbm-pca", "dbm-sae", "das")
MASKED = ("dbm", "dbm-pca", "dbm-sae")
TRAINED = ("das", *MASKED)
MASK_L1 = 0.01  # DBM's penalty on the mask's mean
MASK_LR_SCALE = 10.0  # DBM's learning rate is this times --lr (its logits move further than DAS's rotation)
T_START, T_END = 1.0, 0.01


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
        if self.name in TRAINED:
            out.update(steps=self.steps, lr=self.lr, batch_size=self.batch_size)
        if self.name in MASKED:
            out.pop("k")
            out.update(mask_lr=self.lr * MASK_LR_SCALE, mask_l1=MASK_L1, temperature=[T_START, T_END])
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


def fit(model, location, spec: FeaturizerSpec, train, default_k: int, loss_fn=None,
        saes: dict | None = None) -> tuple[list, dict]:
    """Interventions for each part of ``location`` (one pyvene intervention each) and a
    ``{"k": ..., "train_s": ...}`` record. ``train`` is a :class:`VariableData` (used by every
    featurizer but identity and random); ``saes`` the model's released SAEs by site key (dbm-sae
    trains what is missing)."""
    return fit_many(model, [location], spec, train, default_k, loss_fn, saes)[0]


def fit_many(model, locations, spec: FeaturizerSpec, train, default_k: int, loss_fn=None,
             saes: dict | None = None) -> list[tuple[list, dict]]:
    """:func:`fit` at each of ``locations``, trained side by side: each location starts from the
    same seeded initialisation as alone, and at every step sees the same batch on its own copy of
    it in one forward pass (a location's parameters get the gradient of its own loss only, and
    Adam is per parameter, so each is trained as it would be alone; tested). A location's
    ``train_s`` is its initialisation plus its share of the joint training."""
    built = []
    for loc in locations:
        t0 = time.perf_counter()
        # every initialisation is seeded from ``spec.seed``: the explicit generators, and the
        # global RNG that torch's orthogonal parametrization draws from (it completes a k-column
        # basis to a square one with ``torch.randn`` when DAS's start is assigned), forked so that
        # the caller's RNG state is left as it was
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(spec.seed))
            ivs, ks, sae_info = _init(model, loc, spec, train, default_k, saes or {})
        built.append((ivs, ks, sae_info, time.perf_counter() - t0))
    trained: list[dict] = [{} for _ in locations]
    share = 0.0
    if spec.name in TRAINED:
        t0 = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(spec.seed))
            trained = train_featurizers(model, locations, [b[0] for b in built], spec, train, loss_fn)
        share = (time.perf_counter() - t0) / len(locations)
    out = []
    for (ivs, ks, sae_info, secs), info in zip(built, trained):
        if spec.name in MASKED:
            for iv in ivs:
                iv.hard = True
            ks = [iv.k for iv in ivs]
            info["features"] = [int(iv.mask_logits.shape[0]) for iv in ivs]
        if sae_info:
            info["sae"] = sae_info
        info = {"k": ks[0] if len(ks) == 1 else ks, **info, "train_s": round(secs + share, 3)}
        out.append((ivs, info))
    return out


def _init(model, location, spec, train, default_k, saes) -> tuple[list, list, dict]:
    """The featurizer's interventions at ``location`` before training, their ``k`` and where
    their SAEs came from."""
    from cbench.localization.pyvene_adapter import BasisIntervention, MaskIntervention
    from cbench.localization.sae import site_key, train_sae

    gen = torch.Generator().manual_seed(int(spec.seed))
    ivs, ks, sae_info = [], [], {}
    for part in location.parts:
        width = part.site.width(model)
        frame = part.frame(width)
        m = frame.shape[1]
        if spec.name == "identity":
            ivs.append(BasisIntervention(frame, basis=torch.eye(m)))
            ks.append(m)
            continue
        if spec.name in ("dbm", "dbm-pca"):
            P = torch.eye(m) if spec.name == "dbm" else _pca_basis(_activations(model, part, train), m)
            ivs.append(MaskIntervention(frame, P=P))
            continue
        if spec.name == "dbm-sae":
            key = site_key(part.site) if part.dims is None else None
            sae = saes.get(key) if key else None
            if sae is None:
                sae, stats = train_sae(_activations(model, part, train), seed=spec.seed)
                sae_info[key or str(part.dims)] = {"source": "trained on the train inputs", **stats}
            else:
                sae_info[key] = {"source": "released with the model", "n_features": sae.n_features}
            ivs.append(MaskIntervention(frame, sae=sae))
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
    return ivs, ks, sae_info


def task_loss(logits: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor, task_type: str) -> torch.Tensor:
    """Mean loss over valid positions: cross-entropy (categorical) or squared error (numerical)."""
    if task_type == "categorical":
        lp = torch.log_softmax(logits, -1)
        nll = -lp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return (nll * valid).sum() / valid.sum().clamp(min=1)
    err = (logits[..., 0] - labels) ** 2
    return (err * valid).sum() / valid.sum().clamp(min=1)


def train_featurizer(model, location, ivs, spec: FeaturizerSpec, train, loss_fn=None) -> dict:
    """Train ``ivs`` (the interventions of ``location``) in place; ``{"steps", "final_loss"}``."""
    return train_featurizers(model, [location], [ivs], spec, train, loss_fn)[0]


def train_featurizers(model, locations, ivs_per_location, spec: FeaturizerSpec, train, loss_fn=None) -> list[dict]:
    """Train each location's interventions in place: DAS rotations or DBM masks (Adam,
    ``spec.steps`` batches drawn from the train pairs epoch by epoch, each epoch in a seeded
    order; masks with their temperature annealed geometrically and the L1 penalty). Returns
    ``{"steps", "final_loss"}`` per location.

    Each step runs the interchange with plain hooks (:class:`HookedInterchange`, equal to
    pyvene's), the sources' vectors computed once for every train pair, every location on its
    own copy of the batch in one forward pass; the loss is the sum of the locations' losses, so
    each location's parameters get its own loss's gradient: the same optimisation as training
    each alone through pyvene, at a fraction of the per-call overhead."""
    from cbench.localization.pyvene_adapter import HookedInterchange

    sites, flat, group = [], [], []
    for g, (loc, ivs) in enumerate(zip(locations, ivs_per_location)):
        for part, x in zip(loc.parts, ivs):
            sites.append(part.site)
            flat.append(x)
            group.append(g)
    G = len(locations)
    iv = HookedInterchange(model, sites, flat, group)
    params = [p for x in flat for p in x.parameters() if p.requires_grad]
    masked = spec.name in MASKED
    opt = torch.optim.Adam(params, lr=spec.lr * (MASK_LR_SCALE if masked else 1.0))
    total = max(1, int(spec.steps) - 1)
    d = train.data
    N = d.n_examples
    gen = torch.Generator().manual_seed(int(spec.seed))
    loss_fn = loss_fn or task_loss
    steps, last = 0, [float("nan")] * G
    sources = iv.sources(d.source)
    while steps < int(spec.steps):
        order = torch.randperm(N, generator=gen)
        for start in range(0, N, int(spec.batch_size)):
            if steps >= int(spec.steps):
                break
            idx = order[start:start + int(spec.batch_size)]
            if masked:
                for x in flat:
                    x.temperature = T_START * (T_END / T_START) ** (steps / total)
            logits = iv(d.base[idx], [a[idx] for a in sources]).chunk(G, 0)
            losses = []
            for g, ivs in enumerate(ivs_per_location):
                loss = loss_fn(logits[g], d.labels[idx], d.valid[idx], d.task_type)
                if masked:
                    loss = loss + MASK_L1 * torch.cat([x.mask() for x in ivs]).mean()
                losses.append(loss)
            opt.zero_grad()
            torch.stack(losses).sum().backward(inputs=params)  # the featurizers only, never the model
            opt.step()
            steps += 1
            last = [float(x.detach()) for x in losses]
    return [{"steps": steps, "final_loss": x} for x in last]


def spec_dict(spec: FeaturizerSpec) -> dict:
    return asdict(spec)
