"""Optimal ablation (Li & Janson 2024, as MIB simplifies it in appendix E.2): one ablation vector
per node, learned to minimise the expected task loss when that node alone is replaced by it.

For every forward node u (``input``, each head, each MLP) a vector a_u ``[d_model]`` is
initialised to the mean of u's output over the training examples and positions, then
optimised by Adam on ``L(do(u = a_u))``, the task loss with u's output replaced by a_u at every
position (the other nodes run normally). All nodes train at once: a batch holds one block of
rows per node, node u's block with u's node mask at 0 and a_u as its ablated value, so a step is
one forward and one backward pass, and a_u receives the gradient of its own block's loss only.
MIB's schedule, shortened for small models on CPUs: batches of 20 examples, the held-out loss
checked every 25 steps, each node stopping when its held-out loss has not improved for 75 steps
(its vector from its best check is kept), at most 300 steps, learning rate 1e-2 (MIB: 1e-3,
1000 steps, checks every 50, patience 150, on LLMs whose activations are of another scale;
:class:`OptimalAblationSettings` takes MIB's values too). The examples are split 80 / 20 into
training and held-out ones, in order.

The vectors depend on the model and the data, so they are cached per model (keyed by the
sha256 of the model's parameters) and per data and settings under
``$CBENCH_HOME/cache.cbench/optimal-ablation/<model sha256>/<data key>.safetensors`` (beside the
Hugging Face cache, not in it); a later run with
the same model, data and settings reads them instead of training. Once learned (or read),
:func:`use` puts them on the runtime, and ``ablation="optimal"`` then means them everywhere
(``rt.ablated_outputs`` gives ``[F, 1, 1, D]``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from cbench.runtime.clean_pass import node_outputs
from cbench.runtime.masks import tokens_tensor
from cbench.runtime.residual_pass import forward_resid

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

FORMAT = 1


@dataclass(frozen=True)
class OptimalAblationSettings:
    lr: float = 1e-2
    batch_size: int = 20
    max_steps: int = 300
    eval_every: int = 25
    patience: int = 75
    seed: int = 0
    held_out: float = 0.2

    def key(self) -> str:
        return (f"lr={self.lr!r};bs={self.batch_size};steps={self.max_steps};eval={self.eval_every};"
                f"patience={self.patience};seed={self.seed};held_out={self.held_out!r}")


def model_sha256(rt: ModelState) -> str:
    """sha256 over the model's parameters and buffers (names, shapes, dtypes and bytes)."""
    if getattr(rt, "_model_sha256", None) is None:
        h = hashlib.sha256()
        for name, t in sorted(rt.model.state_dict().items()):
            a = t.detach().cpu().contiguous()
            h.update(f"{name}:{tuple(a.shape)}:{a.dtype};".encode())
            h.update(a.reshape(-1).view(torch.uint8).numpy().tobytes())
        rt._model_sha256 = h.hexdigest()
    return rt._model_sha256


def _data_key(tokens: torch.Tensor, metric, settings: OptimalAblationSettings) -> str:
    h = hashlib.sha256(f"cbench-optimal-ablation:{FORMAT};{settings.key()};{metric.name};".encode())
    for t in (tokens, metric.reference, metric.valid):
        a = t.detach().cpu().contiguous()
        h.update(f"{tuple(a.shape)}:{a.dtype};".encode())
        h.update(a.numpy().tobytes())
    return h.hexdigest()[:32]


def cache_path(rt: ModelState, tokens, metric, settings: OptimalAblationSettings) -> Path:
    from cbench.hub.cache import default_cache_dir, records_dir

    return (records_dir(default_cache_dir()) / "optimal-ablation" / model_sha256(rt)
            / f"{_data_key(tokens_tensor(rt, tokens), metric, settings)}.safetensors")


def node_losses(rt: ModelState, tokens: torch.Tensor, vectors: torch.Tensor,
                metric: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``[F]``: the loss with node f alone replaced by ``vectors[f]`` (one pass, F row blocks).
    ``metric`` maps outputs ``[F, n, P, V]`` to ``[F]`` (a :class:`cbench.tasks.metrics.Metric`)."""
    F = rt.n_forward
    n = tokens.shape[0]
    nm = 1.0 - torch.eye(F, dtype=rt.dtype, device=rt.device)  # row f: node f ablated
    out = forward_resid(rt, tokens.repeat(F, 1), nm, vectors[:, None, None, :], exact=False).output
    return metric(out.reshape(F, n, *out.shape[1:]))


def learn(rt: ModelState, tokens, metric, settings: OptimalAblationSettings | None = None,
          progress: bool = False) -> tuple[torch.Tensor, dict]:
    """``(vectors [F, D], info)``: trained as the module docstring says. ``metric`` is a
    :class:`cbench.tasks.metrics.Metric` bound to ``tokens`` (labels or clean outputs)."""
    from cbench.tasks.metrics import Metric

    s = settings or OptimalAblationSettings()
    tokens = tokens_tensor(rt, tokens)
    N = tokens.shape[0]
    n_val = min(N - 1, max(1, int(round(s.held_out * N)))) if N > 1 else 0
    n_train = N - n_val
    tr = slice(0, n_train)
    va = slice(n_train, N) if n_val else slice(0, N)

    def sub(sl_or_idx):
        return Metric(metric.name, metric.reference[sl_or_idx], metric.valid[sl_or_idx])

    with torch.no_grad():
        acts = node_outputs(rt, tokens[tr])  # [F, n, P, D]
        init = acts.mean(dim=(1, 2))
    vectors = init.clone().requires_grad_(True)
    opt = torch.optim.Adam([vectors], lr=s.lr)
    gen = torch.Generator().manual_seed(int(s.seed))
    val_tokens, val_metric = tokens[va], sub(va)
    with torch.no_grad():
        best = node_losses(rt, val_tokens, vectors, val_metric).detach().clone()
    init_loss = best.clone()
    best_vec = vectors.detach().clone()
    since = torch.zeros_like(best)
    active = torch.ones(best.shape, dtype=torch.bool, device=best.device)
    steps = 0
    perm = torch.randperm(n_train, generator=gen)
    pos = 0
    for step in range(1, s.max_steps + 1):
        if pos + s.batch_size > n_train:
            perm, pos = torch.randperm(n_train, generator=gen), 0
        idx = perm[pos:pos + min(s.batch_size, n_train)]
        pos += len(idx)
        with torch.enable_grad():
            loss = node_losses(rt, tokens[idx], vectors, sub(idx)).sum()
            opt.zero_grad()
            loss.backward(inputs=[vectors])  # the vectors only, never the model
        vectors.grad[~active] = 0.0  # a stopped node's vector is not needed any more (its best is kept)
        opt.step()
        steps = step
        if step % s.eval_every == 0:
            with torch.no_grad():
                val = node_losses(rt, val_tokens, vectors, val_metric)
                better = (val < best) & active
                best = torch.where(better, val, best)
                best_vec[better] = vectors.detach()[better]
                since = torch.where(better, torch.zeros_like(since), since + s.eval_every)
                active &= since < s.patience
            if not bool(active.any()):
                break
    info = {"steps": steps, "initial_loss": init_loss.tolist(), "loss": best.tolist(), "n_train": n_train,
            "n_held_out": n_val}
    return best_vec.detach(), info


def load_or_learn(rt: ModelState, tokens, metric, settings: OptimalAblationSettings | None = None,
                  progress: bool = False) -> tuple[torch.Tensor, bool]:
    """``(vectors [F, D], from_cache)``: read from the cache, else learned and written there."""
    from safetensors.torch import load_file, save_file

    s = settings or OptimalAblationSettings()
    path = cache_path(rt, tokens, metric, s)
    if path.is_file():
        try:
            v = load_file(str(path))["vectors"]
            if tuple(v.shape) == (rt.n_forward, rt.d_model):
                return v.to(device=rt.device, dtype=rt.dtype), True
        except Exception:  # noqa: BLE001 - a damaged cache entry is learned again
            pass
    vectors, info = learn(rt, tokens, metric, s, progress)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".oa.", dir=str(path.parent))
        os.close(fd)
        save_file({"vectors": vectors.detach().cpu().contiguous()}, tmp,
                  metadata={"format": str(FORMAT), "model_sha256": model_sha256(rt), "settings": s.key(),
                            "steps": str(info["steps"]),
                            "loss": ",".join(f"{x:.6g}" for x in np.asarray(info["loss"]))})
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache costs a retraining next time, nothing else
    return vectors, False


def use(rt: ModelState, vectors: torch.Tensor) -> None:
    """Make ``ablation="optimal"`` mean ``vectors [F, D]`` on this runtime."""
    from cbench.errors import GraphError

    v = torch.as_tensor(vectors).to(device=rt.device, dtype=rt.dtype)
    if tuple(v.shape) != (rt.n_forward, rt.d_model):
        raise GraphError(f"optimal ablation vectors for this model have shape ({rt.n_forward}, {rt.d_model}), "
                         f"got {tuple(v.shape)}")
    rt.optimal_vectors = v.detach()
