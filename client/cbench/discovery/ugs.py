"""UGS: uniform gradient sampling (Li & Janson 2024; MIB appendix E.2).

Every edge e has a logit θ̃_e and θ_e = sigmoid(θ̃_e), the probability that e is in the circuit.
A training step draws, for every example of a minibatch and every edge, a mask value α:
with probability w_e = θ_e (1 − θ_e) uniform on (0, 1) ("sampled"), with probability
θ_e − w_e / 2 exactly 1, otherwise 0; it runs the model with those per-example edge masks
(ablated edges take their ablated value, counterfactual by default) and takes the gradient of
the loss (KL to the clean model; numerical tasks: L2) with respect to every α. The expected loss
E_α[L] has d/dθ_e = E[L | α_e = 1] − E[L | α_e = 0] = ∫_0^1 dL/dα_e dα_e, and with the
sampling frequency w_e = dθ_e/dθ̃_e the estimate

    d E[L] / d θ̃_e  ≈  (1/B) Σ_b 1[α_{b,e} sampled] · dL_b/dα_{b,e}

(the sum of the mean loss's mask gradients over the sampled entries) needs no extra factor.
The sparsity penalty is ``lambda_reg`` times the mean of θ over edges (its gradient is taken
exactly). Adam on θ̃, ``steps`` steps of ``batch_size`` pairs (a fresh random order every epoch).
Scores: θ (MIB uses θ as the importance score); ``in_graph``: θ > 0.5. Every draw comes from one
``torch.Generator`` seeded with ``seed``, so a run is deterministic given its seed.
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import Context, Param, finish, progress_bar
from cbench.discovery.subnetwork_probing import PARAMS as SP_PARAMS
from cbench.discovery.subnetwork_probing import _batches, backward_in_parts, minibatch

PARAMS = {
    **SP_PARAMS,  # steps, batch size, initial logit, seed and ablation as subnetwork probing has them
    "lambda_reg": Param(float, 0.1, low=0.0, doc="weight of the sparsity penalty (mean θ over edges)"),
    "lr": Param(float, 0.1, low=0.0, low_inclusive=False, high=10.0, doc="Adam learning rate"),
}


def sample_alpha(theta: torch.Tensor, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alpha [n, E], sampled [n, E] bool)``: UGS's mask values for ``n`` examples."""
    E = theta.shape[0]
    w = theta * (1.0 - theta)
    u = torch.rand(n, E, generator=gen, dtype=theta.dtype)
    v = torch.rand(n, E, generator=gen, dtype=theta.dtype)
    sampled = u < w
    one = (~sampled) & (u < w + theta - 0.5 * w)
    alpha = torch.where(sampled, v, one.to(theta.dtype))
    return alpha, sampled


def step_gradient(rt, tokens, ablated, metric, alpha: torch.Tensor, sampled: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``(estimate of d E[L] / d θ̃ [E], loss)`` from one draw (see the module docstring)."""
    a = alpha.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        loss = backward_in_parts(rt, tokens, ablated, metric,
                                 lambda t, abl, s, e: rt.run(t, edge_mask=a[s:e], ablated=abl).output)
    return (a.grad * sampled).sum(0), loss


def run(ctx: Context, lambda_reg, lr, steps, batch_size, init, seed=0, ablation="resample", **_):
    t0 = time.perf_counter()
    rt = ctx.runtime
    E = rt.n_edges
    tokens = rt.tokens_tensor(ctx.data.base)
    n = tokens.shape[0]
    ablated, metric = ctx.ablated, ctx.metric
    per_example = ablated.shape[1] == n and n > 1
    logits = torch.full((E,), float(init), dtype=rt.dtype, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    batches = _batches(n, int(batch_size), gen)
    bar = progress_bar(steps, "ugs", ctx.progress)
    loss_v = float("nan")
    for _ in range(steps):
        tok, abl, m = minibatch(next(batches), tokens, ablated, metric, per_example)
        theta = torch.sigmoid(logits.detach())
        alpha, sampled = sample_alpha(theta, tok.shape[0], gen)
        grad, loss_v = step_gradient(rt, tok, abl, m, alpha, sampled)
        grad = grad + lambda_reg * theta * (1.0 - theta) / E  # d (lambda mean θ) / d θ̃
        opt.zero_grad()
        logits.grad = grad.to(logits.dtype)
        opt.step()
        bar.update(1)
    bar.close()
    theta = torch.sigmoid(logits.detach())
    params = {"lambda_reg": lambda_reg, "lr": lr, "steps": steps, "batch_size": batch_size, "init": init,
              "seed": seed, "ablation": ablation}
    return finish(ctx, "ugs", params, theta, (theta > 0.5).cpu().numpy(), t0, extra={"final_loss": loss_v})
