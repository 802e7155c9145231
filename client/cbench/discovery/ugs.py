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
``torch.Generator`` seeded with ``seed``, so a run is deterministic given its seed. The masked runs
of a training step (this protocol) go through :mod:`cbench.runtime.mask_training` (the masked pass in fewer
operations, equal to float32 rounding; where it does not apply, the masked pass itself).

``protocol="mib"`` trains as MIB's UGS code does (``alestolfo/optimalablation``,
``edge_pruning_unif_mib.py`` with ``EdgeMaskUnifSampler``, run with ``reg_lamb`` 1e-3): the same
sampling distribution, but each minibatch of 5 pairs is drawn 12 times (12 mask samples per pair);
each sample's mask is filtered to the edges on an ``input`` -> ``logits`` path of its non-zero
entries (``prune_dangling_edges``); the gradient comes from the code's straight-through sampler
(``sample_modified_unif``), which is the estimate above times w_e = θ_e (1 − θ_e), and times the
sampler's per-edge rescaling (``MaskSampler.sample_mask`` with ``normalize_empirical_mask``):
R / n_e, where R is the number of rows of the step (5 pairs x 12 draws = 60) and n_e the rows
whose drawn value of edge e lies strictly inside (1e-3, 1 − 1e-3), counted before the dangling
filter; 0 when n_e = 0 (:func:`sample_weights`). So an edge's estimate is a mean over the rows
that sampled it rather than a sum divided by R. The penalty is ``lambda_reg`` times the
**sum** of θ over edges (1e-3 by default) plus a node term on every head, ``2e-4 ·
tanh(2 s_h / (L H)) · L H / 2`` with s_h the θ-sum of the edges into and out of head h; AdamW
(betas 0.9 / 0.995, no weight decay) at lr 1e-2 (MIB's 5e-2 / 5 for counterfactual ablation), the
gradient clipped to norm 5 in each edge group (head/other source x head/other destination), and
mask logits start at 1. MIB trains one epoch of 9,500 IOI pairs (1,900 steps): give ``steps``.
"""

from __future__ import annotations

import time

import torch

from cbench.discovery.base import COMMON_PARAMS, Context, Param, finish, progress_bar
from cbench.discovery.subnetwork_probing import PARAMS as SP_PARAMS
from cbench.discovery.subnetwork_probing import _batches, backward_in_parts, minibatch

PARAMS = {
    **SP_PARAMS,  # steps, batch size, initial logit, seed and ablation as subnetwork probing has them
    "lambda_reg": Param(float, None, low=0.0, doc="weight of the sparsity penalty (mean θ over edges; default "
                        "max(0.1, 1e-3 x edges); protocol mib: of the sum over edges, default 1e-3)"),
    "lr": Param(float, None, low=0.0, low_inclusive=False, high=10.0,
                doc="learning rate (default 0.1, Adam; protocol mib: 1e-2, AdamW)"),
    "protocol": COMMON_PARAMS["protocol"],
}
MIB = {"lambda_reg": 1e-3, "node_reg": 2e-4, "lr": 1e-2, "batch_size": 5, "samples": 12, "clip": 5.0, "init": 1.0,
       "betas": (0.9, 0.995)}


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


def sample_weights(alpha: torch.Tensor, low: float = 1e-3) -> torch.Tensor:
    """``[E]``: the gradient factor MIB's mask sampler gives each edge, ``R / n_e`` with ``n_e`` the
    rows (of ``R``) whose value is strictly inside ``(low, 1 - low)``, 0 where no row is."""
    rows = alpha.shape[0]
    n = ((alpha > low) & (alpha < 1.0 - low)).sum(0)
    return torch.where(n > 0, rows / n.clamp(min=1).to(alpha.dtype), torch.zeros((), dtype=alpha.dtype))


def masked_runner(rt, tokens: torch.Tensor, ablated: torch.Tensor):
    """``(run, lean)``: ``run(idx, tok, abl, s, e, masks) -> outputs`` is the run of rows ``s:e``
    of the minibatch ``idx`` (pairs of ``tokens``; None: all of them) under one edge mask per
    row, whose tokens and ablated rows are ``tok`` and ``abl``. ``lean``: on a model the
    mask-learning pass runs (:mod:`cbench.runtime.mask_training`), that pass, prepared here once,
    which reads the pairs' ablated rows itself (``abl`` is then not used); otherwise ``rt.run``."""
    from cbench.runtime import mask_training

    if not mask_training.supported(rt, tokens, ablated):
        return lambda idx, tok, abl, s, e, masks: rt.run(tok, edge_mask=masks, ablated=abl).output, False
    lean = mask_training.EdgeMaskTraining(rt, tokens, ablated)
    n = tokens.shape[0]

    def run(idx, tok, abl, s, e, masks):
        if idx is None and e - s == n:  # the whole set
            return lean.run(None, masks)
        return lean.run((torch.arange(n) if idx is None else idx)[s:e], masks)

    return run, True


def step_gradient(rt, tokens, ablated, metric, alpha: torch.Tensor, sampled: torch.Tensor,
                  run=None, idx=None) -> tuple[torch.Tensor, float]:
    """``(estimate of d E[L] / d θ̃ [E], loss)`` from one draw (see the module docstring);
    ``run``: a :func:`masked_runner`'s run of the pairs ``idx`` (default ``rt.run``)."""
    a = alpha.detach().clone().requires_grad_(True)
    if run is None:
        def run(_idx, t, abl, s, e, masks):
            return rt.run(t, edge_mask=masks, ablated=abl).output
    with torch.enable_grad():
        loss = backward_in_parts(rt, tokens, ablated, metric,
                                 lambda t, abl, s, e: run(idx, t, abl, s, e, a[s:e]), [a])
    return (a.grad * sampled).sum(0), loss


def dangling_filter(graph, keep: torch.Tensor) -> torch.Tensor:
    """``[R, E]`` bool: per row, the edges of ``keep`` on an ``input`` -> ``logits`` path of that
    row's kept edges (:meth:`cbench.graph.graph.Graph.prune_dangling`, all rows at once)."""
    R = keep.shape[0]
    idx = {n.name: i for i, n in enumerate(graph.nodes)}
    src = torch.tensor([idx[e.src] for e in graph.edges])
    dst = torch.tensor([idx[e.dst] for e in graph.edges])
    into: dict[int, list[int]] = {}
    out_of: dict[int, list[int]] = {}
    for e in graph.edges:
        into.setdefault(idx[e.dst], []).append(e.index)
        out_of.setdefault(idx[e.src], []).append(e.index)
    fwd = torch.zeros(R, len(graph.nodes), dtype=torch.bool)
    fwd[:, idx["input"]] = True
    for n in range(len(graph.nodes)):  # nodes are in computation order
        if n in into:
            es = torch.tensor(into[n])
            fwd[:, n] = (keep[:, es] & fwd[:, src[es]]).any(1)
    bwd = torch.zeros(R, len(graph.nodes), dtype=torch.bool)
    bwd[:, idx["logits"]] = True
    for n in reversed(range(len(graph.nodes))):
        if n in out_of:
            es = torch.tensor(out_of[n])
            bwd[:, n] = (keep[:, es] & bwd[:, dst[es]]).any(1)
    return keep & fwd[:, src] & bwd[:, dst]


def mib_penalty(graph, theta: torch.Tensor, lambda_reg: float, node_reg: float) -> torch.Tensor:
    """MIB's complexity loss: ``lambda_reg`` · Σ θ plus the node term on every head."""
    L, H = graph.n_layers, graph.n_heads
    heads = [n.name for n in graph.nodes if n.kind == "head"]
    hi = {h: i for i, h in enumerate(heads)}
    touch = torch.zeros(len(heads), graph.n_edges, dtype=theta.dtype)
    for e in graph.edges:
        for end in (e.src, e.dst):
            if end in hi:
                touch[hi[end], e.index] = 1.0
    s = touch @ theta
    return lambda_reg * theta.sum() + node_reg * (torch.tanh(2 * s / (L * H)) * (L * H) / 2).sum()


def clip_groups(graph) -> list[torch.Tensor]:
    """Edge indices of MIB's parameter groups (head or other source x head or other destination)."""
    kind = {n.name: n.kind == "head" for n in graph.nodes}
    groups: dict[tuple, list[int]] = {}
    for e in graph.edges:
        groups.setdefault((kind[e.src], kind[e.dst]), []).append(e.index)
    return [torch.tensor(v) for _, v in sorted(groups.items())]


def _repeat(x: torch.Tensor, times: int, dim: int) -> torch.Tensor:
    return torch.cat([x] * times, dim=dim)


def run_mib(ctx: Context, lambda_reg, lr, steps, seed, t0, ablation):
    rt = ctx.runtime
    g = ctx.graph
    E = rt.n_edges
    tokens = rt.tokens_tensor(ctx.data.base)
    n = tokens.shape[0]
    ablated, metric = ctx.ablated, ctx.metric
    per_example = ablated.shape[1] == n and n > 1
    S = MIB["samples"]
    logits = torch.full((E,), MIB["init"], dtype=rt.dtype, requires_grad=True)
    opt = torch.optim.AdamW([logits], lr=lr, betas=MIB["betas"], weight_decay=0.0)
    gen = torch.Generator().manual_seed(int(seed))
    batches = _batches(n, MIB["batch_size"], gen)
    groups = clip_groups(g)
    bar = progress_bar(steps, "ugs", ctx.progress)
    loss_v = float("nan")
    for _ in range(steps):
        tok, abl, m = minibatch(next(batches), tokens, ablated, metric, per_example)
        tok = _repeat(tok, S, 0)
        abl = _repeat(abl, S, 1) if per_example else abl
        m = type(m)(m.name, None if m.reference is None else _repeat(m.reference, S, 0), _repeat(m.valid, S, 0))
        theta = torch.sigmoid(logits.detach())
        alpha, sampled = sample_alpha(theta, tok.shape[0], gen)
        weights = sample_weights(alpha)  # counted before the filter, as the reference counts them
        kept = dangling_filter(g, alpha > 0)
        alpha = alpha * kept
        grad, loss_v = step_gradient(rt, tok, abl, m, alpha, sampled & kept)
        opt.zero_grad()
        with torch.enable_grad():
            mib_penalty(g, torch.sigmoid(logits), lambda_reg, MIB["node_reg"]).backward()
        logits.grad = logits.grad + (grad * weights * theta * (1.0 - theta)).to(logits.dtype)
        with torch.no_grad():
            for idx in groups:
                norm = float(logits.grad[idx].norm())
                if norm > MIB["clip"]:
                    logits.grad[idx] *= MIB["clip"] / (norm + 1e-6)
        opt.step()
        bar.update(1)
    bar.close()
    theta = torch.sigmoid(logits.detach())
    params = {"lambda_reg": lambda_reg, "lr": lr, "steps": steps, "batch_size": MIB["batch_size"],
              "init": MIB["init"], "seed": seed, "ablation": ablation, "protocol": "mib"}
    extra = {"final_loss": loss_v, "protocol": "mib: MIB's UGS code (12 samples per pair, per-sample dangling filter, "
             "per-edge gradient rescaling by rows / rows sampled, sum-over-edges penalty with a node term, AdamW with "
             "clipping); the paper states only the sampling"}
    return finish(ctx, "ugs", params, theta, (theta > 0.5).cpu().numpy(), t0, extra=extra)


def default_lambda(n_edges: int) -> float:
    """The default weight of the mean-θ penalty: ``max(0.1, 1e-3 · n_edges)``, i.e. at least MIB's
    1e-3 per edge (its penalty is 1e-3 · Σ θ), never below 0.1 (the weight tuned on the small
    Tracr/SIIT graphs). GPT-2 small (32,491 edges): 32.5 where a fixed 0.1 was about 300x weaker."""
    return max(0.1, 1e-3 * n_edges)


def run(ctx: Context, lambda_reg, lr, steps, batch_size, init, seed=0, ablation="resample", protocol="cbench", **_):
    t0 = time.perf_counter()
    if protocol == "mib":
        return run_mib(ctx, MIB["lambda_reg"] if lambda_reg is None else lambda_reg,
                       MIB["lr"] if lr is None else lr, steps, seed, t0, ablation)
    lambda_reg = default_lambda(ctx.runtime.n_edges) if lambda_reg is None else lambda_reg
    lr = 0.1 if lr is None else lr
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
    masked, lean = masked_runner(rt, tokens, ablated)
    for _ in range(steps):
        idx = next(batches)
        tok, abl, m = minibatch(idx, tokens, ablated, metric, per_example and not lean)
        theta = torch.sigmoid(logits.detach())
        alpha, sampled = sample_alpha(theta, tok.shape[0], gen)
        grad, loss_v = step_gradient(rt, tok, abl, m, alpha, sampled, masked, idx)
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
