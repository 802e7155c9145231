"""Strict Interchange Intervention Training (SIIT) of a low-level transformer against a Tracr model.

The high-level model is the compiled Tracr model (a TransformerLens artifact); its variables are
the components of its ground-truth circuit (attention heads and MLPs). The low-level model has
the InterpBench architecture (:func:`~cbench_builders.siit.architecture.low_level_config`); each
high-level head maps to a seeded random low-level head of the same layer and each high-level MLP
to the same layer's MLP (:func:`~cbench_builders.siit.architecture.make_correspondence`).

Training algorithms (:attr:`~cbench_builders.siit.config.TrainingConfig.algorithm`):

* ``"algorithm-1"`` -- InterpBench's Algorithm 1: per batch of (base, source) pairs an IIT step,
  a strictness step and a behaviour step, each with its own optimizer step; Adam betas
  (0.9, 0.999), constant learning rate. Algorithm 1 loops over pairs and samples the high-level
  node (IIT) and the non-aligned low-level node (strictness) *per pair*; we do exactly that, for a
  whole batch at once, with per-example intervention masks.
* ``"summed"`` -- appendix H's variant: one summed loss; every non-aligned node is interchanged
  independently with probability ``strict_prob`` (0.5), sampled per example; Adam betas
  (0.9, 0.9); learning rate decayed linearly from ``lr`` to ``lr_end`` over ``lr_decay_epochs``
  (default: ``epochs``). The three losses run as one forward pass on the stacked batch.
* either of them with ``siit_weight = 0`` is plain IIT (the comparison of the paper's RQ1).

Choices where the paper is silent (recorded in meta.json ``training``):

* The weights returned are those of the best validation epoch (the worst of accuracy, IIA, SIIA
  and the per-node SIIA margin), which is the last epoch when training stops at the target; late
  in training Adam can drift away from a reached optimum, and the kept epoch is recorded.

* Source activations are computed once per batch, before the batch's first optimizer step
  (Algorithm 1's later steps of the same batch use them as they are). By default without
  gradients, as a TransformerLens activation cache gives them; with ``source_gradients`` the
  loss is differentiated through them too, which is the full gradient of the SIIT objective
  L(LL(b | V <- V(s)), y_b). Without it the strictness loss cannot reach the interchanged node's
  own weights, and a non-aligned node in the last layer (``m1`` of a one-layer case) can only be
  silenced indirectly: on cases 29 and 35 its SIIA stalled at 0.55-0.7 for 40 epochs, while with
  ``source_gradients`` every node reaches SIIA 1.0 within 4 epochs (about a third more compute
  per step).
* Data (:mod:`cbench_builders.siit.data`): inputs sampled from the seed, causal models on the
  maximum length only, every input used for training and validation when the space is small.

Losses and metrics: :mod:`cbench_builders.siit.losses` (cross-entropy / MSE per labelled
position, BOS and RASP ``None`` excluded) and :mod:`cbench_builders.siit.evaluation` (accuracy,
IIA, SIIA). The interventions of each step: :mod:`cbench_builders.siit.interventions`; the
low-level architecture and the correspondence: :mod:`cbench_builders.siit.architecture`.

Everything runs on the CPU and is deterministic given the seed and the thread count.
"""

from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from cbench_builders.siit.checkpoint import TrainState, load_state, save_state
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import InputSet, draw_weights, length_counts
from cbench_builders.siit.evaluation import Evaluation
from cbench_builders.siit.interchange import ComponentForward
from cbench_builders.siit.interventions import Interventions
from cbench_builders.siit.losses import Losses


def make_optimizer(params, cfg: TrainingConfig) -> torch.optim.Optimizer:
    """Adam with the config's lr and betas (the fused CPU kernel when this torch has it)."""
    try:
        return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas)


def hardware_description(threads: int) -> str:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu: {cpu}, {os.cpu_count()} cores, {threads} torch thread(s), torch {torch.__version__}"


@dataclass
class TrainingResult:
    model: object
    metrics: dict
    history: list[dict]
    epochs: int
    training_time_s: float
    reached_target: bool
    config: TrainingConfig
    correspondence: dict[str, str]
    hardware: str = ""
    per_node: dict = field(default_factory=dict)
    training_cpu_s: float = 0.0
    best_epoch: int = 0  # the epoch whose weights were kept (the best validation score)


class SIITTrainer(Losses, Interventions, Evaluation):
    """Trains ``ll_model`` so that it implements ``hl_model``'s circuit under ``correspondence``.

    ``correspondence`` maps each high-level node to one low-level node (or a list of them).

    ``hl_model`` is a compiled Tracr model (a HookedTransformer), or a hand-written high-level
    model that speaks :class:`ComponentForward`'s protocol itself (``component_forward = True``:
    ``names``, ``index``, ``acts(tokens)``, ``forward(tokens, source, mask)``), such as
    :class:`cbench.tasks.ioi_high_level.IOIHighLevel`. ``objective`` replaces the per-position
    targets, loss and agreement of a Tracr case (``target(hl_out, tokens)``, ``loss(ll_out,
    target)``, ``agree(ll_out, target)``), e.g. IOI's next-token loss with the interventions on
    the last token (:class:`cbench_builders.ioi.model.LastTokenObjective`).

    Its parts: targets and losses (:class:`~cbench_builders.siit.losses.Losses`), intervention
    masks and edge-ablated runs (:class:`~cbench_builders.siit.interventions.Interventions`),
    validation metrics (:class:`~cbench_builders.siit.evaluation.Evaluation`); here the loop."""

    def __init__(self, hl_model, ll_model, correspondence: dict, task_type: str, config: TrainingConfig,
                 none_class: int | None = None, truth_edges: list[str] | None = None,
                 invariant_edges: list[str] | None = None, objective=None):
        self.hl = hl_model.eval()
        self.ll = ll_model
        self.corr = dict(correspondence)
        self.numerical = task_type == "numerical"
        self.cfg = config
        self.none_class = none_class  # the low-level class of RASP None (categorical), else None: unlabelled
        self.truth_edges = sorted(truth_edges or [])
        self.invariant_edges = sorted(invariant_edges or [])  # ground-truth edges ablated with the others
        self.objective = objective
        self._rt = None
        if config.edge_strict and not self.truth_edges:
            raise ValueError("edge-level strictness needs the ground-truth edges (truth_edges)")
        for p in self.hl.parameters():
            p.requires_grad_(False)
        self.hl_f = hl_model if getattr(hl_model, "component_forward", False) else ComponentForward(hl_model)
        self.ll_f = ComponentForward(ll_model)
        self.hl_nodes = list(self.corr)
        weights = config.iit_node_weights or {}
        unknown = sorted(set(weights) - set(self.hl_nodes))
        if unknown:
            raise ValueError(f"iit_node_weights names {', '.join(unknown)}, not high-level nodes of this model "
                             f"({', '.join(self.hl_nodes)})")
        unknown = sorted(set(config.invariant_edge_weights or {}) - set(self.invariant_edges))
        if unknown:
            raise ValueError(f"invariant_edge_weights names {', '.join(unknown)}, not a ground-truth edge the "
                             f"program ignores ({', '.join(self.invariant_edges) or 'this model has none'})")
        # the IIT node draw: None uniform (torch.randint, as before), else these relative weights
        self.iit_node_p = (torch.tensor([weights.get(n, 1.0) for n in self.hl_nodes], dtype=torch.float64)
                           if weights else None)
        targets = {n: ([v] if isinstance(v, str) else list(v)) for n, v in self.corr.items()}
        aligned = {ll for v in targets.values() for ll in v}
        self.non_aligned = [n for n in self.ll_f.names if n not in aligned]
        n_ll = len(self.ll_f.names)
        # hl node j -> its column in the high-level model / its low-level columns
        self.hl_cols = torch.tensor([self.hl_f.index[n] for n in self.hl_nodes], dtype=torch.long)
        self.align = torch.zeros(len(self.hl_nodes), n_ll, dtype=torch.bool)
        for j, n in enumerate(self.hl_nodes):
            for ll in targets[n]:
                self.align[j, self.ll_f.index[ll]] = True
        self.na_cols = torch.tensor([self.ll_f.index[n] for n in self.non_aligned], dtype=torch.long)
        self.na_colmask = torch.zeros(n_ll, dtype=torch.bool)
        self.na_colmask[self.na_cols] = True

    # -- training
    def _batches(self, inputs: dict[int, torch.Tensor], labels: dict[int, torch.Tensor], gen: torch.Generator,
                 sources: dict[int, torch.Tensor] | None = None, weights: dict[int, torch.Tensor] | None = None):
        """One epoch of (base, source, base label) batches: lengths weighted by the config's
        ``length_weighting`` (equally by default), pairs drawn
        with replacement (uniformly, or by ``weights``: :func:`~cbench_builders.siit.data.draw_weights`),
        each batch of one length, batches in random order. With ``sources``
        the source of base ``i`` is ``sources[L][i]`` (a counterfactual pair)."""
        cfg = self.cfg
        counts = length_counts(inputs, cfg.pairs_per_epoch, cfg.length_weighting)
        batches = []
        for L, per_len in counts.items():
            n = len(inputs[L])
            if weights is None:
                bi = torch.randint(n, (per_len,), generator=gen)
                si = torch.randint(n, (per_len,), generator=gen)
            else:
                bi = torch.multinomial(weights[L], per_len, replacement=True, generator=gen)
                si = torch.multinomial(weights[L], per_len, replacement=True, generator=gen)
            if sources is not None:
                si = bi
            for s in range(0, per_len, cfg.batch_size):
                batches.append((L, bi[s:s + cfg.batch_size], si[s:s + cfg.batch_size]))
        order = torch.randperm(len(batches), generator=gen).tolist()
        for i in order:
            L, bi, si = batches[i]
            yield inputs[L][bi], (inputs if sources is None else sources)[L][si], labels[L][bi]

    def train(self, data: InputSet, progress: bool = True, log=None, checkpoint: Path | None = None) -> TrainingResult:
        """Train to the targets or the limits. With ``checkpoint`` (a file) the state is saved
        there after every epoch and a run finds it continues from it (the limits count the
        earlier runs' time too): :mod:`cbench_builders.siit.checkpoint`."""
        cfg = self.cfg
        prev_threads = torch.get_num_threads()
        torch.set_num_threads(cfg.threads)
        try:
            return self._train(data, progress, log, checkpoint)
        finally:
            torch.set_num_threads(prev_threads)

    def _train(self, data: InputSet, progress: bool, log, checkpoint: Path | None = None) -> TrainingResult:
        cfg = self.cfg
        gen = torch.Generator().manual_seed(cfg.seed)
        opt = make_optimizer(self.ll.parameters(), cfg)
        with torch.no_grad():
            labels = {L: self._target(self.hl_f(x), x) for L, x in data.train.items()}
        weights = draw_weights(labels, cfg.label_balance)
        eval_pairs = self.eval_pairs(data.val, cfg.eval_pairs, seed=cfg.seed + 1, sources=data.val_sources,
                                     weighting=cfg.length_weighting)
        steps_per_epoch = sum(math.ceil(k / cfg.batch_size)
                              for k in length_counts(data.train, cfg.pairs_per_epoch, cfg.length_weighting).values())
        decay_steps = max(1, steps_per_epoch * cfg.lr_decay_epochs - 1)
        history: list[dict] = []
        start = time.perf_counter()
        cpu_start = time.process_time()
        reached = False
        step = 0
        epoch = 0
        best = None  # (score, epoch, state): the best validation epoch is what training returns
        saved = load_state(checkpoint, self.ll, opt, gen) if checkpoint is not None else None
        if saved is not None:  # continue an earlier run: its clocks count towards the limits
            step, epoch, history, best, reached = saved.step, saved.epoch, saved.history, saved.best, saved.reached
            start -= saved.wall_s
            cpu_start -= saved.cpu_s
            if cfg.algorithm != "summed":  # Adam's saved state carries the old run's lr: this run's --lr wins
                for g in opt.param_groups:  # (the summed loss sets it from the schedule at every step)
                    g["lr"] = cfg.lr
        first = epoch + 1
        if saved is not None and ((reached and epoch >= cfg.min_epochs) or self._limited(start, cpu_start)):
            first = cfg.epochs + 1  # finished before (target or limits): nothing left to train
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.epochs, initial=epoch, desc=f"{cfg.kind} {cfg.algorithm}", unit="epoch", leave=True,
                       mininterval=1.0)
        for epoch in range(first, cfg.epochs + 1):
            self.ll.train()
            sums = np.zeros(4)
            nb = 0
            for base, source, y_b in self._batches(data.train, labels, gen, data.train_sources, weights):
                if cfg.algorithm == "summed":
                    frac = min(1.0, step / decay_steps)
                    for g in opt.param_groups:
                        g["lr"] = cfg.lr + (cfg.lr_end - cfg.lr) * frac
                sums += self._step(opt, base, source, y_b, gen)
                nb += 1
                step += 1
            metrics = self.evaluate_pairs(eval_pairs)
            metrics.update(epoch=epoch, loss_iit=sums[0] / nb, loss_strict=sums[1] / nb, loss_behavior=sums[2] / nb,
                           loss_edge=sums[3] / nb, elapsed_s=round(time.perf_counter() - start, 2))
            history.append(metrics)
            if bar is not None:
                bar.set_postfix(acc=f"{metrics['accuracy']:.4f}", iia=f"{metrics['iia']:.4f}",
                                siia=f"{metrics['siia']:.4f}", l_iit=f"{sums[0] / nb:.3g}",
                                **({"edge": f"{metrics['edge_siia']:.4f}"} if cfg.edge_strict else {}), refresh=False)
                bar.update(1)
            if log:
                log(metrics)
            score = self._score(metrics)
            # a tie goes to the later epoch up to min_epochs (the targets hold early; a soft objective
            # goes on improving), to the earlier one after it (the rule without min_epochs)
            if best is None or score > best[0] or (score == best[0] and epoch <= cfg.min_epochs):
                best = (score, epoch, {k: v.detach().clone() for k, v in self.ll.state_dict().items()})
            reached = self._reached(metrics)
            if checkpoint is not None:
                save_state(checkpoint, TrainState(step, epoch, history, best, reached,
                                                  time.perf_counter() - start, time.process_time() - cpu_start),
                           self.ll, opt, gen)
            if reached or self._limited(start, cpu_start):
                break
        epoch = len(history)
        if bar is not None:
            bar.close()
        chosen = history[-1] if history else {}
        if cfg.keep == "best" and best is not None and best[1] != epoch:  # drifted after its best epoch: restore that
            self.ll.load_state_dict(best[2])
            chosen = history[best[1] - 1]
        self.ll.eval()
        elapsed = time.perf_counter() - start
        final = {k: chosen[k] for k in ("accuracy", "iia", "siia")} if chosen else {}
        return TrainingResult(self.ll, final, history, epoch, elapsed, reached, cfg, self.corr,
                              hardware_description(cfg.threads),
                              per_node=chosen.get("per_node", {}) if chosen else {},
                              best_epoch=(epoch if cfg.keep == "last" else best[1]) if best else 0,
                              training_cpu_s=time.process_time() - cpu_start)

    def _limited(self, start: float, cpu_start: float) -> bool:
        """The wall or CPU limit is reached (clocks started at ``start`` / ``cpu_start``)."""
        cfg = self.cfg
        if cfg.time_limit_s is not None and time.perf_counter() - start > cfg.time_limit_s:
            return True
        return cfg.cpu_limit_s is not None and time.process_time() - cpu_start > cfg.cpu_limit_s

    def _score(self, metrics: dict) -> float:
        """How close an epoch is to the targets: minus the summed shortfall of the stopping metrics
        below their targets (0 exactly when the targets are reached). A sum, not the worst metric:
        with the worst alone, a model that has learnt little (every ablation harmless, IIA low)
        can outrank one that is learning but still leaks through an edge."""
        cfg = self.cfg
        wants = [(metrics["accuracy"], cfg.target), (metrics["iia"], cfg.target)]
        if cfg.kind != "iit":
            wants += [(metrics["siia"], cfg.target), (metrics["min_siia_node"], cfg.node_target)]
            if cfg.edge_strict:
                wants.append((metrics["edge_siia"], cfg.edge_target))
        return -sum(max(0.0, t - v) for v, t in wants)

    def _reached(self, metrics: dict) -> bool:
        """Early stop: accuracy, IIA (and for SIIT: SIIA and every node's SIIA) at the target.
        IIT (strictness weight 0) does not train strictness, so its SIIA is not a stopping criterion."""
        cfg = self.cfg
        if metrics.get("epoch", cfg.min_epochs) < cfg.min_epochs:
            return False
        if min(metrics["accuracy"], metrics["iia"]) < cfg.target:
            return False
        if cfg.kind == "iit":
            return True
        if cfg.edge_strict and metrics["edge_siia"] < cfg.edge_target:
            return False
        if cfg.edge_iit > 0 and metrics.get("edge_iia", 1.0) < cfg.target:
            return False
        return metrics["siia"] >= cfg.target and metrics["min_siia_node"] >= cfg.node_target

    def _step(self, opt, base, source, y_b, gen) -> np.ndarray:
        """One batch: returns the (IIT, strictness, behaviour, edge strictness) losses (unweighted)."""
        cfg = self.cfg
        B = len(base)
        hl_src = self.hl_f.acts(source)
        ll_src = self.ll_f(source, collect=True)[1] if cfg.source_gradients else self.ll_f.acts(source)
        hl_mask, iit_mask = self._iit_masks(B, gen)
        with torch.no_grad():
            y_iit = self._target(self.hl_f(base, hl_src, hl_mask), base)
        strict = cfg.siit_weight > 0 and len(self.non_aligned) > 0
        strict_mask = self._strict_mask(B, gen) if strict else None
        edge_keep = self._edge_masks(B, gen) if cfg.edge_strict else None
        y_edge = y_b
        if edge_keep is not None and cfg.edge_iit > 0:  # edge-level IIT on the circuit's edges too
            edge_keep, y_edge = self._edge_iit(edge_keep, base, source, gen)
        out = np.zeros(4)
        if cfg.algorithm == "algorithm-1":
            parts = [(0, iit_mask, y_iit, cfg.iit_weight), (1, strict_mask, y_b, cfg.siit_weight),
                     (2, None, y_b, cfg.behavior_weight), (3, edge_keep, y_edge, cfg.edge_weight)]
            for i, mask, target, weight in parts:
                if weight <= 0 or (i == 1 and not strict) or (i == 3 and edge_keep is None):
                    continue
                opt.zero_grad(set_to_none=True)
                if i == 1 and cfg.source_gradients:  # the source run again, with this step's weights
                    ll_src = self.ll_f(source, collect=True)[1]
                logits = self._edge_run(base, source, mask) if i == 3 else self.ll_f(base, ll_src, mask)
                loss = self._loss(logits, target)
                (loss * weight).backward()
                self._clip()
                opt.step()
                out[i] = loss.item()
            return out
        # summed: the three losses as one forward pass on the stacked batch
        blocks = [(0, iit_mask, y_iit, cfg.iit_weight)]
        if strict:
            blocks.append((1, strict_mask, y_b, cfg.siit_weight))
        blocks.append((2, torch.zeros_like(iit_mask), y_b, cfg.behavior_weight))
        tokens = base.repeat(len(blocks), 1)
        idx = torch.arange(B).repeat(len(blocks))
        logits = self.ll_f(tokens, ll_src.index(idx), torch.cat([b[1] for b in blocks]))
        total = 0.0
        for k, (i, _, target, weight) in enumerate(blocks):
            loss = self._loss(logits[k * B:(k + 1) * B], target)
            total = total + loss * weight
            out[i] = loss.item()
        if edge_keep is not None:  # the source's node outputs from ll_src (edge_sources "shared")
            loss = self._loss(self._edge_run(base, source, edge_keep, ll_src), y_edge)
            total = total + loss * cfg.edge_weight
            out[3] = loss.item()
        opt.zero_grad(set_to_none=True)
        total.backward()
        self._clip()
        opt.step()
        return out

    def _clip(self) -> None:
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.ll.parameters(), self.cfg.grad_clip)
