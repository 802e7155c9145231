"""SIIT against any HookedTransformer high-level model, through a given correspondence.

``cbench build siit`` (:func:`cbench_builders.siit.build.train_case`) reads a compiled Tracr model
as the high-level model and derives the low-level shape and the correspondence from it. The
trainer itself needs neither Tracr nor that rule: any high-level model that
:class:`~cbench_builders.siit.interchange.ComponentForward` runs (no normalization, standard
positional embeddings, relu/gelu MLPs) serves, with its variables the components of its circuit.
This module is that general path: a low-level shape of its own (:func:`low_level_shape`, e.g. more
heads of another width than the high-level model, a residual stream of any width), a
correspondence checked against both graphs (:func:`check_correspondence`: every high-level
circuit edge maps to an edge of the low-level graph), the ground truth mapped through it, and the
training (:func:`train_hooked`). The stress tier's trained counterparts
(:mod:`cbench_builders.stress.siit`) use it; the Tracr path is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from cbench.errors import BuildError
from cbench_builders.siit.architecture import map_circuit_edges
from cbench_builders.siit.config import TrainingConfig
from cbench_builders.siit.data import InputSet, task_inputs


def low_level_shape(hl_config: dict, *, n_heads: int, d_head: int, d_model: int | None = None,
                    d_mlp: int | None = None, n_layers: int | None = None, act_fn: str = "relu", seed: int = 0,
                    model_name: str = "siit-low-level") -> dict:
    """A low-level config for ``hl_config``'s task (vocabularies, context, attention direction)
    with its own shape: ``n_heads`` heads of width ``d_head``, a residual stream of ``d_model``
    (default ``n_heads * d_head``; any width), ``d_mlp`` (default ``4 * d_model``), ``n_layers``
    (default the high-level model's), no normalization, TransformerLens's initialisation from ``seed``."""
    d_model = int(d_model or n_heads * d_head)
    keep = ("n_ctx", "d_vocab", "d_vocab_out", "attention_dir", "positional_embedding_type",
            "default_prepend_bos", "dtype")
    cfg = {k: hl_config[k] for k in keep if k in hl_config}
    cfg.update(model_name=model_name, n_layers=int(n_layers or hl_config["n_layers"]), n_heads=int(n_heads),
               d_head=int(d_head), d_model=d_model, d_mlp=int(d_mlp or 4 * d_model), act_fn=act_fn,
               attn_only=False, normalization_type=None, seed=int(seed), init_weights=True)
    cfg.setdefault("positional_embedding_type", "standard")
    return cfg


def circuit_components(edges: list[str]) -> list[str]:
    """The heads and MLPs that circuit ``edges`` join (``input`` and ``logits`` left out), sorted."""
    from cbench.graph.graph import parse_edge_name

    nodes = set()
    for e in edges:
        src, dst, _ = parse_edge_name(e)
        nodes |= {src, dst}
    return sorted(nodes - {"input", "logits"})


def check_correspondence(mapping: dict[str, str], hl_edges: list[str], hl_model, ll_model) -> list[str]:
    """The low-level ground truth: ``hl_edges`` mapped through ``mapping``. Refuses (BuildError) a
    correspondence that misses a circuit component, names a node either model lacks, sends two
    high-level nodes to one low-level node, or maps a circuit edge onto no edge of the low-level
    graph (a destination not after its source)."""
    from cbench.graph.graph import Graph

    hl_graph, ll_graph = Graph.from_config(hl_model.cfg), Graph.from_config(ll_model.cfg)
    needed = circuit_components(hl_edges)
    missing = [n for n in needed if n not in mapping]
    if missing:
        raise BuildError(f"the correspondence does not map the circuit's {', '.join(missing)}")
    hl_nodes, ll_nodes = set(hl_graph.forward_nodes), set(ll_graph.forward_nodes)
    bad = [f"{h} -> {l}" for h, l in mapping.items() if h not in hl_nodes or l not in ll_nodes]
    if bad:
        raise BuildError(f"the correspondence names nodes the models do not have: {', '.join(bad)}")
    if len(set(mapping.values())) != len(mapping):
        raise BuildError(f"the correspondence maps two high-level nodes to one low-level node: {mapping}")
    truth = map_circuit_edges(hl_edges, mapping)
    absent = [e for e in truth if not ll_graph.has_edge(e)]
    if absent:
        raise BuildError(f"circuit edges mapped onto no edge of the low-level graph: {', '.join(absent)}")
    return truth


def whole_space(input_tokens: list[str], bos_token: str, length: int, pad_token: str | None = None) -> InputSet:
    """Every input of ``length`` tokens (BOS first), for training and validation alike (a task
    whose mechanism is defined on every sequence, such as a stress model's)."""
    xs = task_inputs(input_tokens, bos_token, pad_token, length, n=10 ** 9, seed=0)
    return InputSet({length: xs}, {length: xs}, shared=True,
                    origin="every input of the task's length (cbench_builders.siit.hooked.whole_space)")


@dataclass
class HookedRun:
    """What :func:`train_hooked` returns: the training's result, the trainer (its metrics and
    evaluation), and the low-level ground truth and invariant edges."""

    result: object  # TrainingResult
    trainer: object  # SIITTrainer
    truth_edges: list[str]
    invariant_edges: list[str]


def train_hooked(hl_model, ll_config: dict, mapping: dict[str, str], hl_edges: list[str], data: InputSet,
                 cfg: TrainingConfig, *, invariant_hl_edges: list[str] | None = None, objective=None,
                 task_type: str = "categorical", checkpoint: Path | None = None, progress: bool = False,
                 log=None) -> HookedRun:
    """Train a fresh low-level model of ``ll_config`` to implement ``hl_model``'s circuit
    ``hl_edges`` under ``mapping`` (high-level circuit component -> low-level component), with
    ``cfg``'s algorithm, strictness and edge strictness; ``invariant_hl_edges`` are circuit edges
    the high-level model ignores under resample ablation (position-only queries and keys), ablated
    in edge strictness like the edges outside the circuit. ``objective``: see
    :class:`~cbench_builders.siit.trainer.SIITTrainer` (e.g.
    :class:`~cbench_builders.siit.losses.DistributionObjective`)."""
    from cbench.artifacts.transformer_lens_adapter import build_model
    from cbench_builders.siit.interchange import ComponentForward
    from cbench_builders.siit.trainer import SIITTrainer

    if not ComponentForward.supports(hl_model):
        raise BuildError("the high-level model has normalization, rotary embeddings or another feature "
                         "the SIIT forward pass does not run")
    ll_model = build_model(ll_config)
    ll_model.train()
    truth = check_correspondence(mapping, hl_edges, hl_model, ll_model)
    invariant = map_circuit_edges(list(invariant_hl_edges or []), mapping)
    unknown = sorted(set(invariant) - set(truth))
    if unknown:
        raise BuildError(f"invariant edges outside the circuit: {', '.join(unknown)}")
    aligned = {n: mapping[n] for n in circuit_components(hl_edges)}
    trainer = SIITTrainer(hl_model, ll_model, aligned, task_type, cfg, truth_edges=truth, invariant_edges=invariant,
                          objective=objective)
    with torch.random.fork_rng():
        result = trainer.train(data, progress=progress, log=log, checkpoint=checkpoint)
    return HookedRun(result, trainer, truth, invariant)
