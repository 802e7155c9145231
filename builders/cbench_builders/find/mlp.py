"""The MLPs that approximate FIND's "neural" numeric functions, trained as FIND trains them.

FIND (Schwettmann et al., 2023, section 2.1: "we train an MLP for 10k epochs on 10k points
uniformly sampled on its domain bounded by (-100, 100)"; its public generator,
``src/make_functions/make_numeric/train_functions.py`` and ``generate_functions.py``):

* a two-layer ReLU MLP ``Linear(1, 64) -> ReLU -> Linear(64, 1)`` with PyTorch's default
  ``nn.Linear`` initialisation (weights and biases ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``);
* 10,000 evenly spaced points of ``[-100, 100]`` (``np.linspace``; the paper says "uniformly
  sampled"), raw inputs and raw targets (no normalisation);
* full-batch MSE, Adam with learning rate 0.01 and PyTorch's default betas and eps, 10,000
  epochs of one full-batch step each.

:func:`train` does exactly that, for every MLP of the suite at once, in numpy float64 (FIND:
torch float32), deterministic from a seed (each MLP's initial weights come from its own stream,
``(seed, 2, index)``). A 1-H-1 ReLU network is piecewise linear with H breakpoints, and on sorted
inputs each hidden unit is active on a prefix or a suffix of them; so the forward pass and the
exact gradient of the MSE are computed from prefix sums in O(N + H) per MLP instead of O(N H)
(:func:`loss_and_grad`; ``tests/test_find_mlp.py`` checks it against torch autograd and the
optimiser against ``torch.optim.Adam``). That is what makes 10,000 epochs of 150 MLPs take
minutes of one core.

:func:`measure_fits` measures each trained MLP's fit as FIND's NMSE, ``sum((mlp - f)^2) /
sum(f^2)``, on fresh uniform inputs (not the training points) over the training domain
``(-100, 100)`` and over the interpreter's range ``[-128, 128]``, evaluating the stored float32
weights with :func:`cbench.find.functions.mlp_forward` (not the training code).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np

from cbench.find import functions as F


@dataclass(frozen=True)
class MlpRecipe:
    """How the MLPs are trained (defaults: FIND's)."""

    hidden: int = 64
    points: int = 10_000
    epochs: int = 10_000
    lr: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lo: float = -100.0
    hi: float = 100.0

    def as_dict(self) -> dict:
        return asdict(self)


#: FIND's recipe (the paper and its public code)
FIND_RECIPE = MlpRecipe()
#: fresh inputs per range for the fit measurement
FIT_POINTS = 100_000
#: the interpreter's range (FIND's prompt and test grid)
TEST_RANGE = (-128.0, 128.0)


@dataclass(frozen=True)
class MlpFit:
    """One trained MLP's fit to the function it approximates (FIND's NMSE on fresh inputs)."""

    key: str
    family: str
    nmse_train: float   # over the training domain (-100, 100)
    nmse_test: float    # over the interpreter's range [-128, 128]
    final_loss: float   # the training MSE after the last epoch (raw units)


@dataclass
class _Params:
    w1: np.ndarray  # (M, H)
    b1: np.ndarray  # (M, H)
    w2: np.ndarray  # (M, H)
    b2: np.ndarray  # (M,)

    def arrays(self) -> list[np.ndarray]:
        return [self.w1, self.b1, self.w2, self.b2]


def init_params(n: int, hidden: int, seed: int) -> _Params:
    """PyTorch's ``nn.Linear`` default initialisation for ``Linear(1, H)`` and ``Linear(H, 1)``,
    one numpy stream per MLP: ``(seed, 2, index)``."""
    w1, b1, w2, b2 = (np.empty((n, hidden)), np.empty((n, hidden)), np.empty((n, hidden)), np.empty(n))
    bound2 = 1.0 / math.sqrt(hidden)
    for i in range(n):
        g = np.random.default_rng([seed, 2, i])
        w1[i] = g.uniform(-1.0, 1.0, hidden)
        b1[i] = g.uniform(-1.0, 1.0, hidden)
        w2[i] = g.uniform(-bound2, bound2, hidden)
        b2[i] = g.uniform(-bound2, bound2)
    return _Params(w1, b1, w2, b2)


def _active_split(x: np.ndarray, w1: np.ndarray, b1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each unit: ``pos`` (active on a suffix of the sorted ``x``) and ``k``, the first index
    of that suffix, or for the others the end of the prefix they are active on."""
    n = len(x)
    pos = w1 > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = -b1 / w1
    k_pos = np.searchsorted(x, np.where(pos, t, 0.0), side="right")   # x[k:] > t
    k_neg = np.searchsorted(x, np.where(w1 < 0, t, 0.0), side="left")  # x[:k] < t
    flat = w1 == 0  # active everywhere when b1 > 0, nowhere otherwise
    k = np.where(pos, k_pos, k_neg)
    k = np.where(flat, np.where(b1 > 0, 0, n), k)
    pos = pos | flat
    return pos, k.reshape(w1.shape)


def _forward_sorted(x: np.ndarray, p: _Params, pos: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Every MLP's output on the sorted points ``x``: the slope and intercept of the piecewise
    linear function, accumulated from each unit's breakpoint."""
    m, h = p.w1.shape
    n = len(x)
    base = (np.arange(m) * (n + 1))[:, None]
    start = (base + np.where(pos, k, 0)).ravel()
    stop = (base + np.where(pos, n, k)).ravel()
    idx = np.concatenate([start, stop])
    out = []
    for v in (p.w2 * p.w1, p.w2 * p.b1):
        v = v.ravel()
        d = np.bincount(idx, np.concatenate([v, -v]), minlength=m * (n + 1)).reshape(m, n + 1)
        out.append(np.cumsum(d, axis=1)[:, :n])
    slope, intercept = out
    return slope * x + intercept + p.b2[:, None]


def loss_and_grad(x: np.ndarray, y: np.ndarray, p: _Params) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per-MLP MSE on sorted ``x`` (N,) against ``y`` (M, N), and its exact gradient with
    respect to ``w1, b1, w2, b2`` (ReLU's derivative at 0 taken as 0, as torch does)."""
    pos, k = _active_split(x, p.w1, p.b1)
    err = _forward_sorted(x, p, pos, k) - y
    n = len(x)
    loss = np.mean(err ** 2, axis=1)
    r = err * (2.0 / n)
    zeros = np.zeros((len(r), 1))
    cr = np.concatenate([zeros, np.cumsum(r, axis=1)], axis=1)          # (M, N+1)
    cxr = np.concatenate([zeros, np.cumsum(r * x, axis=1)], axis=1)
    at_k_r, at_k_xr = np.take_along_axis(cr, k, axis=1), np.take_along_axis(cxr, k, axis=1)
    s_r = np.where(pos, cr[:, -1:] - at_k_r, at_k_r)      # sum of r over each unit's active points
    s_xr = np.where(pos, cxr[:, -1:] - at_k_xr, at_k_xr)  # sum of r * x over them
    grads = [p.w2 * s_xr, p.w2 * s_r, p.w1 * s_xr + p.b1 * s_r, cr[:, -1]]
    return loss, grads


def _adam(params: list[np.ndarray], recipe: MlpRecipe, steps: int, grad_fn) -> np.ndarray:
    """``torch.optim.Adam`` (no weight decay, no amsgrad), ``steps`` steps in place; returns the
    loss before the last step."""
    b1, b2 = recipe.betas
    m = [np.zeros_like(a) for a in params]
    v = [np.zeros_like(a) for a in params]
    loss = np.array([])
    for t in range(1, steps + 1):
        loss, grads = grad_fn()
        c1, c2 = 1 - b1 ** t, math.sqrt(1 - b2 ** t)
        for a, g, mi, vi in zip(params, grads, m, v):
            mi *= b1
            mi += (1 - b1) * g
            vi *= b2
            vi += (1 - b2) * g * g
            a -= (recipe.lr / c1) * mi / (np.sqrt(vi) / c2 + recipe.eps)
    return loss


def train(targets: Mapping[str, Mapping], seed: int, recipe: MlpRecipe = FIND_RECIPE
          ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Train one MLP per target spec (evaluated by :func:`cbench.find.functions.numeric_mean`);
    returns the float32 weights, keys ``<id>.w1 (H,1)``, ``<id>.b1 (H)``, ``<id>.w2 (1,H)``,
    ``<id>.b2 (1)``, and each MLP's training MSE after the last epoch."""
    if not targets:
        return {}, {}
    keys = list(targets)
    x = np.linspace(recipe.lo, recipe.hi, recipe.points)
    y = np.stack([np.asarray(F.numeric_mean(targets[k], x), dtype=np.float64) for k in keys])
    if not np.all(np.isfinite(y)):
        bad = [k for k, row in zip(keys, y) if not np.all(np.isfinite(row))]
        raise ValueError(f"MLP targets undefined on [{recipe.lo:g}, {recipe.hi:g}]: {', '.join(bad[:5])}")
    p = init_params(len(keys), recipe.hidden, seed)
    _adam(p.arrays(), recipe, recipe.epochs, lambda: loss_and_grad(x, y, p))
    final, _ = loss_and_grad(x, y, p)
    h = recipe.hidden
    out: dict[str, np.ndarray] = {}
    for i, key in enumerate(keys):
        out[f"{key}.w1"] = p.w1[i].reshape(h, 1).astype(np.float32)
        out[f"{key}.b1"] = p.b1[i].astype(np.float32)
        out[f"{key}.w2"] = p.w2[i].reshape(1, h).astype(np.float32)
        out[f"{key}.b2"] = np.array([p.b2[i]], dtype=np.float32)
    return out, {key: float(final[i]) for i, key in enumerate(keys)}


def nmse(truth: np.ndarray, approx: np.ndarray) -> float:
    """FIND's normalised MSE: ``sum((truth - approx)^2) / sum(truth^2)``."""
    den = float(np.sum(truth ** 2))
    return float(np.sum((truth - approx) ** 2) / den) if den > 0 else float("inf")


def measure_fits(weights: Mapping[str, np.ndarray], targets: Mapping[str, Mapping], seed: int,
                 final_loss: Mapping[str, float] | None = None, recipe: MlpRecipe = FIND_RECIPE,
                 n_points: int = FIT_POINTS) -> list[MlpFit]:
    """Each MLP's NMSE against its target on fresh uniform inputs (stream ``(seed, 3)``), over the
    training domain and over the interpreter's range, from the stored weights."""
    g = np.random.default_rng([seed, 3])
    x_train = g.uniform(recipe.lo, recipe.hi, n_points)
    x_test = g.uniform(*TEST_RANGE, n_points)
    fits = []
    for key, target in targets.items():
        scores = [nmse(F.numeric_mean(target, xs), F.mlp_forward(weights, key, xs)) for xs in (x_train, x_test)]
        fits.append(MlpFit(key=key, family=F.numeric_family(target), nmse_train=scores[0], nmse_test=scores[1],
                           final_loss=float((final_loss or {}).get(key, float("nan")))))
    return fits


def summarise(fits: list[MlpFit]) -> dict:
    """The figures the card states about the fits (over the training domain)."""
    v = np.array([f.nmse_train for f in fits])
    if not len(v):
        return {"n": 0}
    q = np.quantile(v, [0.1, 0.5, 0.9])
    return {"n": len(v), "median": float(q[1]), "q10": float(q[0]), "q90": float(q[2]), "max": float(v.max()),
            "below_0_1": int((v < 0.1).sum()), "below_0_01": int((v < 0.01).sum())}
