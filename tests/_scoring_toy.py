"""A hand-built small HookedTransformer with a known circuit, for the scoring tests.

2 layers x 2 heads with MLPs, random weights (seeded), then the *inactive* nodes a0.h1, a1.h0
and m1 are silenced (W_O = 0 for the heads, W_out = b_out = 0 for the MLP), so they output
zero whatever they read. The ground-truth circuit is every edge among the active nodes
(input, a0.h0, m0, a1.h1, logits): edges from inactive nodes carry zeros and edges into them
change nothing, so the circuit reproduces the model exactly under any ablation, and with random
weights every circuit edge matters.
"""

from __future__ import annotations

import torch

from cbench.graph.graph import Graph

ACTIVE = ("input", "a0.h0", "m0", "a1.h1", "logits")
META = {
    "schema": "cbench/model-meta/v1", "case": "toy", "model_kind": "tracr", "task_type": "categorical",
    "description": "toy", "input_tokens": ["BOS", "a", "b", "c", "d"], "bos_token": "BOS", "pad_token": None,
    "output_classes": ["x", "y", "z"], "min_seq_len": 5, "max_seq_len": 5, "causal": True, "seed": 0,
}


def toy_config(n_layers: int = 2, n_heads: int = 2, seed: int = 0) -> dict:
    return {"n_layers": n_layers, "n_heads": n_heads, "d_model": 16, "d_head": 4, "d_mlp": 32, "d_vocab": 5,
            "d_vocab_out": 3, "n_ctx": 5, "act_fn": "relu", "normalization_type": None, "seed": seed,
            "attention_dir": "causal", "positional_embedding_type": "standard", "init_weights": True}


def toy_model(seed: int = 0, scale: float = 1.0):
    from cbench.artifacts.transformer_lens_adapter import build_model

    model = build_model(toy_config(seed=seed))
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in model.parameters():  # larger weights: outputs depend clearly on every path
            p.copy_(torch.randn(p.shape, generator=gen) * scale / max(1, p.shape[-1]) ** 0.5)
        model.blocks[0].attn.W_O[1].zero_()
        model.blocks[1].attn.W_O[0].zero_()
        model.blocks[1].mlp.W_out.zero_()
        model.blocks[1].mlp.b_out.zero_()
        for blk in model.blocks:
            blk.attn.b_O.zero_()
    return model


def toy_circuit_edges(graph: Graph) -> list[str]:
    return [e.name for e in graph.edges if e.src in ACTIVE and e.dst in ACTIVE]


def toy_case(seed: int = 0):
    from cbench.scoring.task import case_from_model

    model = toy_model(seed)
    graph = Graph.from_config(model.cfg)
    edges = toy_circuit_edges(graph)
    circuit = {"schema": "cbench/circuit/v1", "case": "toy", "model_kind": "tracr", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": True, "parallel_attn_mlp": False},
               "nodes": sorted(graph.nodes_of(edges)), "edges": edges}
    return case_from_model(model, META, circuit, case="toy")


def edge_scores_doc(graph: Graph, scores, case: str = "toy", in_graph=None, d_model: int = 16) -> dict:
    in_graph = in_graph if in_graph is not None else [False] * graph.n_edges
    return {
        "schema": "cbench/edge-scores/v1", "case": case,
        "model": {"repo": "local/toy", "revision": "v1.0.0", "kind": "tracr"},
        "method": {"name": "oracle", "hyperparameters": {}},
        "data": {"split": "validation", "n_examples": 10}, "runtime_s": 0.0,
        "cfg": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "parallel_attn_mlp": False, "d_model": d_model},
        "nodes": {n: {"in_graph": False} for n in graph.node_names},
        "edges": {name: {"score": float(s), "in_graph": bool(f)}
                  for name, s, f in zip(graph.edge_names, scores, in_graph)},
    }


FULL_META = dict(META, case="toy3", training=None, metrics=None, dataset_revision=None, training_time_s=None,
                 hardware="cpu", cbench_version="0.1.0")


def write_toy_artifact(path, seed: int = 0):
    """The toy model as a model artifact directory (case id 'toy3'); returns the artifact."""
    from cbench.artifacts.model import write_model_artifact

    model = toy_model(seed)
    graph = Graph.from_config(model.cfg)
    edges = toy_circuit_edges(graph)
    circuit = {"schema": "cbench/circuit/v1", "case": "toy3", "model_kind": "tracr", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": True, "parallel_attn_mlp": False},
               "nodes": sorted(graph.nodes_of(edges)), "edges": edges}
    return write_model_artifact(path, model, FULL_META, circuit=circuit)
