"""FIND's MLP-approximated functions: the closed-form training step is torch's autograd and Adam,
the initialisation is PyTorch's, training with FIND's recipe fits, the fit is measured honestly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cbench.find import functions as F
from cbench_builders.find import mlp as M


def _params(m=3, h=8, seed=0):
    g = np.random.default_rng(seed)
    return M._Params(w1=g.normal(0, 1, (m, h)), b1=g.normal(0, 20, (m, h)), w2=g.normal(0, 1, (m, h)),
                     b2=g.normal(0, 1, m))


def _tensors(p):
    return [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in p.arrays()]


def _torch_loss(x, y, t):
    """The MLPs' MSE written the direct way, O(N H), for autograd."""
    w1, b1, w2, b2 = t
    xt = torch.tensor(x, dtype=torch.float64)
    pred = (torch.relu(xt[None, :, None] * w1[:, None, :] + b1[:, None, :]) * w2[:, None, :]).sum(-1) + b2[:, None]
    return ((pred - torch.tensor(y)) ** 2).mean(dim=1)


def test_loss_and_gradient_are_torch_autograds():
    x = np.linspace(-100, 100, 501)
    y = np.stack([3 * np.abs(x) - 7, np.sin(x / 9) * 40, np.where(x > 13, 5.0, -2.0)])
    p = _params()
    p.w1[0, 0] = 0.0  # a flat unit: active everywhere (b1 > 0) or nowhere
    p.b1[0, 0] = 4.0
    p.w1[1, 0], p.b1[1, 0] = 0.0, -4.0
    loss, grads = M.loss_and_grad(x, y, p)
    t = _tensors(p)
    tloss = _torch_loss(x, y, t)
    tloss.sum().backward()
    np.testing.assert_allclose(loss, tloss.detach().numpy(), rtol=1e-10)
    for g, a in zip(grads, t):
        np.testing.assert_allclose(g, a.grad.numpy(), rtol=1e-8, atol=1e-9 * np.abs(a.grad.numpy()).max())


def test_adam_steps_are_torch_optim_adams():
    x = np.linspace(-100, 100, 301)
    y = np.stack([0.02 * x ** 2 - x, np.tanh((x - 10) / 15) * 30])
    p = _params(m=2, h=6, seed=1)
    recipe = M.MlpRecipe(hidden=6, points=301, epochs=25)
    t = _tensors(p)
    opt = torch.optim.Adam(t, lr=recipe.lr)
    for _ in range(recipe.epochs):
        opt.zero_grad()
        _torch_loss(x, y, t).sum().backward()
        opt.step()
    M._adam(p.arrays(), recipe, recipe.epochs, lambda: M.loss_and_grad(x, y, p))
    for a, b in zip(p.arrays(), t):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-7, atol=1e-9)
    assert not np.allclose(p.w1, _params(m=2, h=6, seed=1).w1)  # it moved


def test_initialisation_is_pytorchs_and_one_stream_per_mlp():
    p = M.init_params(40, 64, seed=5)
    assert np.abs(p.w1).max() <= 1 and np.abs(p.b1).max() <= 1
    assert np.abs(p.w2).max() <= 1 / 8 and np.abs(p.b2).max() <= 1 / 8
    assert np.abs(p.w1).max() > 0.95 and np.abs(p.w2).max() > 0.95 / 8  # the whole range, not a narrower one
    lin = torch.nn.Linear(64, 1)  # PyTorch's own bound for the second layer
    assert float(lin.weight.detach().abs().max()) <= 1 / 8
    first = M.init_params(1, 64, seed=5)
    np.testing.assert_array_equal(first.w1[0], p.w1[0])  # an MLP's start does not depend on the others
    assert not np.array_equal(M.init_params(1, 64, seed=6).w1[0], p.w1[0])


def test_a_short_recipe_fits_and_the_measure_uses_fresh_points():
    targets = {"a": {"kind": "atomic", "family": "absolute", "params": {}, "a": 3, "b": -20},
               "b": {"kind": "atomic", "family": "sin", "params": {"p": 2.0, "c": 0.0}, "a": 10, "b": 0}}
    recipe = M.MlpRecipe(points=2000, epochs=3000)
    weights, final = M.train(targets, seed=0, recipe=recipe)
    assert weights["a.w1"].shape == (64, 1) and weights["a.w2"].shape == (1, 64) and weights["a.b2"].dtype == np.float32
    fits = {f.key: f for f in M.measure_fits(weights, targets, seed=0, final_loss=final, recipe=recipe)}
    assert fits["a"].nmse_train < 1e-3  # |x| is two pieces: 64 units hold it
    assert fits["b"].nmse_train > 0.5  # a period of 2 over 200 units of x is 100 periods: 64 units cannot
    x = np.linspace(-100, 100, 2000)
    train_mse = np.mean((F.mlp_forward(weights, "a", x) - F.numeric_mean(targets["a"], x)) ** 2)
    assert train_mse == pytest.approx(final["a"], rel=1e-3, abs=1e-6)
    s = M.summarise(list(fits.values()))
    assert s["n"] == 2 and s["below_0_1"] == 1 and s["max"] == fits["b"].nmse_train


def test_training_is_deterministic_and_refuses_undefined_targets():
    targets = {"a": {"kind": "atomic", "family": "relu", "params": {}, "a": 2, "b": 1}}
    recipe = M.MlpRecipe(points=500, epochs=200)
    w1, _ = M.train(targets, seed=3, recipe=recipe)
    w2, _ = M.train(targets, seed=3, recipe=recipe)
    assert all(np.array_equal(w1[k], w2[k]) for k in w1)
    with pytest.raises(ValueError, match="undefined"):
        M.train({"l": {"kind": "atomic", "family": "log", "params": {}, "a": 1, "b": 0}}, seed=0, recipe=recipe)


def test_nmse_is_finds():
    t = np.array([1.0, -2.0, 2.0])
    assert M.nmse(t, t) == 0.0 and M.nmse(t, 0 * t) == 1.0
    assert M.nmse(t, t + 1) == pytest.approx(3 / 9)
    assert math.isinf(M.nmse(0 * t, t))
