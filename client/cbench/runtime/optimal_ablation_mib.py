"""Optimal ablation as MIB's reference code computes it (``hannamw/MIB-circuit-track`` ``oa.py``,
``OptimalAblationFinder``, and the loader of the EAP-IG library it pins, ``utils.py::load_ablations``),
for ``--protocol mib`` with ``ablation="optimal"``. cbench's own optimal ablation
(:mod:`cbench.runtime.optimal_ablation`) follows the paper; this module reproduces the code,
departures from the paper included:

* **Components** (``_find_default_components``): ``hook_embed`` (the token embedding: positions
  are added afterwards, so the input node's ablated output here is the vector plus the positional
  embedding), each layer's ``attn.hook_result`` (one ``[n_heads, d_model]`` parameter: the layer's
  heads are replaced together), each layer's MLP output and the last layer's ``hook_resid_post``
  (trained, never loaded).
* **Initialisation** (``compute_means``): the mean over ``num_steps`` batches of the **sum** over
  the batch and the positions (padding included) of the component's output: batch × length × the
  mean.
* **Batches**: ``next(iter(dataloader))`` every step, on a shuffling loader: each step the first
  batch of a fresh shuffle, i.e. ``batch_size`` examples drawn anew (not the first batch of a
  fixed order). ``batch_size``: the script's ``20 if model in ("gpt2", ...) else 5`` compares the
  model *object* with strings, so it is 5.
* **Objective**: next-token cross-entropy over the whole prompt (``logits[:, :-1]`` against
  ``input_ids[:, 1:]``, padding included), each component replaced alone, every position; one
  Adam (lr 1e-3) per component. That is a language-model loss: it applies only to a model whose
  output vocabulary is its input vocabulary (cbench's IOI model; even there the model was trained
  at the answer position only). For a classifier (the Tracr, SIIT and stress models) it has no
  meaning; :func:`objective_for` says so and cbench's task loss is used instead.
* **Stopping**: every ``check_every`` (10) steps, from step 0, the mean over components of that
  step's training loss is compared with the best so far; after ``patience`` (3) checks without
  improvement training stops. The **last** vectors are kept, not the best.
* **Loading** (``load_ablations``): ``hook_embed``'s vector for ``input``; for attention only the
  first head of each layer is read (the loop skips a layer's later heads), so head 0 gets its
  vector and the other heads keep zeros; each MLP its vector.

And one thing the reference cannot do: at the pinned EAP-IG commit ``evaluate_graph`` asserts that
the intervention is one of patching, zero, mean and mean-positional, so MIB's own CPR/CMD with
``--ablation optimal`` stops there; the vectors only reach attribution (``attribute.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from cbench.runtime.clean_pass import node_outputs
from cbench.runtime.layers import unembed
from cbench.runtime.masks import tokens_tensor
from cbench.runtime.residual_pass import forward_resid

if TYPE_CHECKING:
    from cbench.runtime.model_state import ModelState

__all__ = [
    "MibOptimalAblationSettings",
    "ablated_mib",
    "components",
    "first_rows",
    "learn_mib",
    "loaded_vectors",
    "mean_init",
    "mib_optimal_ablated",
    "next_token_loss",
    "objective_for",
    "positional_part",
    "task_loss",
]


@dataclass(frozen=True)
class MibOptimalAblationSettings:
    """``oa.py``'s values: ``OptimalAblationFinder(num_steps=1000, check_every=10, patience=3)``,
    Adam lr 1e-3, batches of 5 (see the module docstring)."""

    lr: float = 1e-3
    num_steps: int = 1000
    check_every: int = 10
    patience: int = 3
    batch_size: int = 5
    seed: int = 0


def components(rt: ModelState) -> list[list[int]]:
    """The reference's components as lists of forward-node indices: input, then per layer the
    layer's heads (together) and its MLP. (The final ``hook_resid_post`` is handled apart.)"""
    g = rt.graph
    out = [[0]]
    for layer in range(rt.n_layers):
        out.append([g.forward_index(f"a{layer}.h{h}") for h in range(rt.n_heads)])
        if rt.has_mlp:
            out.append([g.forward_index(f"m{layer}")])
    return out


def objective_for(meta, cfg=None) -> tuple[str, str]:
    """(``next-token`` or ``task``, why): the reference's next-token loss where it means something
    (meta.json's ``output_classes`` are its ``input_tokens``; without meta: ``d_vocab_out == d_vocab``)."""
    meta = meta or {}
    inputs, outputs = list(meta.get("input_tokens") or []), list(meta.get("output_classes") or [])
    lm = (inputs and inputs == outputs) if meta else (cfg is not None and cfg.d_vocab_out == cfg.d_vocab)
    if lm:
        return "next-token", ("MIB's next-token cross-entropy over the prompt (the model's outputs are its input "
                              "vocabulary; it was trained at the answer position only)")
    return "task", ("MIB's next-token loss over the prompt cannot apply to a classifier (its outputs are not its "
                    "input vocabulary): cbench's task loss instead, the rest as MIB's code")


def positional_part(rt: ModelState, P: int) -> torch.Tensor:
    """``[P, D]``: what the ``input`` node adds to ``hook_embed`` (the positional embedding; 0
    with rotary or shortformer embeddings, which act inside attention)."""
    if rt.rotary or rt.shortformer:
        return torch.zeros(P, rt.d_model, dtype=rt.dtype, device=rt.device)
    tok = torch.zeros(1, P, dtype=torch.long, device=rt.device)
    with torch.no_grad():
        return rt.model.pos_embed(tok)[0].to(rt.dtype)


def _draw(gen: torch.Generator, n: int, k: int) -> torch.Tensor:
    """The first batch of a fresh shuffle: k of n examples."""
    return torch.randperm(n, generator=gen)[:min(k, n)]


def mean_init(rt: ModelState, tokens: torch.Tensor, s: MibOptimalAblationSettings) -> torch.Tensor:
    """``compute_means``: ``[F + 1, D]`` (the last row: ``hook_resid_post``), each the mean over
    ``num_steps`` drawn batches of the sum over batch and positions of the component's output."""
    from cbench.runtime.clean_pass import plain_pass

    tokens = tokens_tensor(rt, tokens)
    N, P = tokens.shape
    gen = torch.Generator().manual_seed(int(s.seed) + 1)  # the means loader is a copy: its own shuffles
    pos = positional_part(rt, P)
    total = torch.zeros(rt.n_forward + 1, rt.d_model, dtype=torch.float64, device=rt.device)
    for _ in range(s.num_steps):
        idx = _draw(gen, N, s.batch_size)
        with torch.no_grad():
            res = plain_pass(rt, tokens[idx])
            acts = res.acts.double()  # [F, n, P, D]
            acts[0] = acts[0] - pos.double()  # hook_embed: without positions
            total[:-1] += acts.sum((1, 2))
            total[-1] += _resid_post(rt, tokens[idx]).double().sum((0, 1))
    return (total / s.num_steps).to(rt.dtype)


def _resid_post(rt: ModelState, tokens: torch.Tensor) -> torch.Tensor:
    """The last layer's ``hook_resid_post`` ``[n, P, D]`` (the sum of every node's output and the biases)."""
    acts = node_outputs(rt, tokens)
    from cbench.runtime.weights import current_biases

    b = current_biases(rt)
    return acts.sum(0) + b.logits


def _losses(rt: ModelState, tokens: torch.Tensor, idx: torch.Tensor, vectors: torch.Tensor, comps: list[list[int]],
            loss_fn, pos: torch.Tensor) -> torch.Tensor:
    """``[len(comps) + 1]``: each component replaced alone by its vectors (the input: vector +
    positions), and the last row: the logits of ``hook_resid_post`` replaced."""
    tokens = tokens[idx]
    n, P = tokens.shape
    C, F = len(comps), rt.n_forward
    nm = torch.ones(C, F, dtype=rt.dtype, device=rt.device)
    for c, fs in enumerate(comps):
        nm[c, fs] = 0.0
    abl = vectors[:F, None, None, :].expand(F, 1, P, rt.d_model)
    abl = torch.cat([(abl[0] + pos)[None], abl[1:]], 0)
    out = forward_resid(rt, tokens.repeat(C, 1), nm, abl, exact=False).output
    per = loss_fn(out.reshape(C, n, P, -1), idx)
    final = loss_fn(unembed(rt, vectors[F].expand(n, P, -1))[None], idx)
    return torch.cat([per, final])


def next_token_loss(tokens: torch.Tensor):
    """``loss(outputs [C, n, P, V], idx) -> [C]``: ``CrossEntropyLoss()(logits[..., :-1, :],
    input_ids[..., 1:])`` of the rows ``idx`` of ``tokens``, per row block."""
    def loss(outputs: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(outputs[..., :-1, :], -1)
        tgt = tokens[idx][:, 1:].expand(outputs.shape[0], -1, -1)
        return -logp.gather(-1, tgt[..., None])[..., 0].mean((1, 2))
    return loss


def task_loss(metric):
    """``loss(outputs [C, n, P, V], idx) -> [C]`` from a :class:`cbench.tasks.metrics.Metric` bound to all rows."""
    from cbench.tasks.metrics import Metric

    def loss(outputs: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return Metric(metric.name, metric.reference[idx], metric.valid[idx])(outputs)
    return loss


def learn_mib(rt: ModelState, tokens, loss_fn=None, settings: MibOptimalAblationSettings | None = None,
              init: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """``(vectors [F + 1, D], info)`` as ``compute_optimal_ablation`` trains them (``loss_fn(outputs
    [C, n, P, V], row indices) -> [C]``; default :func:`next_token_loss`). Row ``F``: ``hook_resid_post``."""
    s = settings or MibOptimalAblationSettings()
    tokens = tokens_tensor(rt, tokens)
    N, P = tokens.shape
    loss_fn = loss_fn or next_token_loss(tokens)
    comps = components(rt)
    vectors = (mean_init(rt, tokens, s) if init is None else init.to(rt.dtype)).clone().requires_grad_(True)
    opt = torch.optim.Adam([vectors], lr=s.lr)  # elementwise: the same steps as one Adam per component
    pos = positional_part(rt, P)
    gen = torch.Generator().manual_seed(int(s.seed))
    best, since, steps, history = float("inf"), 0, 0, []
    for step in range(s.num_steps):
        idx = _draw(gen, N, s.batch_size)
        with torch.enable_grad():
            losses = _losses(rt, tokens, idx, vectors, comps, loss_fn, pos)
            opt.zero_grad()
            losses.sum().backward(inputs=[vectors])  # the vectors only, never the model
        opt.step()
        steps = step + 1
        if step % s.check_every == 0:
            avg = float(losses.detach().mean())
            history.append(avg)
            if avg < best:
                best, since = avg, 0
            else:
                since += 1
                if since >= s.patience:
                    break
    return vectors.detach(), {"steps": steps, "checks": history}


def loaded_vectors(rt: ModelState, vectors: torch.Tensor) -> torch.Tensor:
    """``load_ablations``: ``[F, D]`` with ``input`` and the MLPs from their vectors, head 0 of each
    layer from its own, every other head zero."""
    out = torch.zeros(rt.n_forward, rt.d_model, dtype=rt.dtype, device=rt.device)
    out[0] = vectors[0]
    g = rt.graph
    for layer in range(rt.n_layers):
        h0 = g.forward_index(f"a{layer}.h0")
        out[h0] = vectors[h0]
        if rt.has_mlp:
            f = g.forward_index(f"m{layer}")
            out[f] = vectors[f]
    return out


def ablated_mib(rt: ModelState, vectors: torch.Tensor, P: int) -> torch.Tensor:
    """The ablated node outputs ``[F, 1, P, D]`` the loaded vectors mean: the input node's is its
    vector plus the positional embedding (the reference replaces ``hook_embed`` only)."""
    v = loaded_vectors(rt, vectors)
    abl = v[:, None, None, :].expand(-1, 1, P, -1).clone()
    abl[0, 0] = abl[0, 0] + positional_part(rt, P)
    return abl


def first_rows(tokens: torch.Tensor) -> torch.Tensor:
    """Indices of the first occurrence of each distinct row (MIB trains on each prompt once)."""
    seen, keep = set(), []
    for i, row in enumerate(tokens.tolist()):
        if tuple(row) not in seen:
            seen.add(tuple(row))
            keep.append(i)
    return torch.tensor(keep, dtype=torch.long)


def mib_optimal_ablated(rt: ModelState, base, metric, settings: MibOptimalAblationSettings | None = None
                        ) -> tuple[torch.Tensor, str]:
    """(ablated node outputs ``[F, 1, P, D]``, what was done): MIB's vectors learned on the distinct
    base prompts, by the next-token loss where it applies (:func:`objective_for`) or else ``metric``
    (cbench's task loss, a :class:`cbench.tasks.metrics.Metric` bound to ``base``'s rows)."""
    from cbench.tasks.metrics import Metric

    tokens = tokens_tensor(rt, base)
    keep = first_rows(tokens)
    objective, why = objective_for(getattr(rt.artifact, "meta", None), rt.cfg)
    rows = tokens[keep]
    if objective == "next-token":
        loss = next_token_loss(rows)
    else:
        loss = task_loss(Metric(metric.name, metric.reference[keep], metric.valid[keep]))
    vectors, info = learn_mib(rt, rows, loss, settings)
    note = (f"optimal ablation as MIB's oa.py: {why}; {info['steps']} steps of {(settings or MibOptimalAblationSettings()).batch_size} "
            "drawn prompts, started at batch x length x the mean, the last vectors kept, head 0 of each layer "
            "given its vector and the other heads zero")
    return ablated_mib(rt, vectors, tokens.shape[1]), note
