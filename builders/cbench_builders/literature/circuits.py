"""The literature's circuits as cbench circuit documents (``cbench/circuit/v1``, model kind
``pretrained``), written into the client's package data (``cbench/graph/literature/``) so that
``cbench test-circuit --model ... literature:ioi`` and ``cbench adversarial`` read them by name.

The four circuits are those the circuit hypothesis tests (Shi et al. 2024) evaluate, in the
edge-level encoding of the ACDC paper (Conmy et al. 2023, its appendix on the canonical circuits),
which both papers state their results on; cbench's graph has the same nodes and edges (the
``input`` node is the embedding, ``<q>``/``<k>``/``<v>`` edges into heads, MLPs read the heads of
their own layer), so each encoding's rule carries over name for name:

* **ioi** (Wang et al. 2023, GPT-2 small): the 26 heads of the paper's seven classes; every MLP is
  kept whole (embedding -> MLP, MLP -> MLP, MLP -> logits, MLP -> every circuit head's q/k/v,
  every circuit head -> the MLPs of its own and later layers); between heads and from the
  embedding only the class-to-class connections of the paper's circuit figure, on the q, k or v
  input the paper names (e.g. S-inhibition -> name movers on the query only).
* **greater-than** (Hanna et al. 2023, GPT-2 small, ACDC's simplification): the heads 0.1, 0.3,
  0.5 and the "AMID" heads 5.5, 6.1, 6.9, 7.10, 8.11, 9.1; MLPs 0-3 and 8-11; groups connected
  as the paper's figure, plus every MLP before the AMID heads into their queries.
* **docstring** (Heimersheim and Janiak 2023, attn-only-4l): the hand-written list of 37 edges
  of ACDC's appendix less its 13 internal q/k/v -> head edges (implicit in cbench's graph):
  24 edges.
* **induction** (Olsson et al. 2022's mechanism, the circuit ACDC finds with zero ablation on
  Redwood's 2-layer attention-only model): a previous-token head 0.0 and the induction head 1.6.

Run ``python -m cbench_builders.literature.circuits`` to rewrite the files; a test checks that the
committed files equal what this module builds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cbench.graph import Graph
from cbench.graph.graph import edge_name

OUT_DIR = Path(__file__).resolve().parents[3] / "client" / "cbench" / "graph" / "literature"

GPT2_SMALL = {"name": "gpt2", "n_layers": 12, "n_heads": 12, "d_model": 768, "attn_only": False,
              "positional_embedding_type": "standard"}
ATTN_ONLY_4L = {"name": "attn-only-4l", "n_layers": 4, "n_heads": 8, "d_model": 512, "attn_only": True,
                "positional_embedding_type": "shortformer"}
REDWOOD_2L = {"name": "redwood_attn_2l", "n_layers": 2, "n_heads": 8, "d_model": 256, "attn_only": True,
              "positional_embedding_type": "shortformer"}

# ----------------------------------------------------------------------------- IOI
IOI_CLASSES = {  # Wang et al. 2023, figure 2 / section 3 (ACDC's IOI_CIRCUIT)
    "name-mover": [(9, 9), (10, 0), (9, 6)],
    "backup-name-mover": [(10, 10), (10, 6), (10, 2), (10, 1), (11, 2), (9, 7), (9, 0), (11, 9)],
    "negative-name-mover": [(10, 7), (11, 10)],
    "s-inhibition": [(7, 3), (7, 9), (8, 6), (8, 10)],
    "induction": [(5, 5), (5, 8), (5, 9), (6, 9)],
    "duplicate-token": [(0, 1), (0, 10), (3, 0)],
    "previous-token": [(2, 2), (4, 11)],
}
IOI_CONNECTIONS = {  # (sender class or "input", receiver class or "logits") -> inputs of the receiver
    ("input", "previous-token"): "qkv",
    ("input", "duplicate-token"): "qkv",
    ("input", "s-inhibition"): "q",
    ("input", "negative-name-mover"): "kv",
    ("input", "name-mover"): "kv",
    ("input", "backup-name-mover"): "kv",
    ("previous-token", "induction"): "kv",
    ("induction", "s-inhibition"): "kv",
    ("duplicate-token", "s-inhibition"): "kv",
    ("s-inhibition", "negative-name-mover"): "q",
    ("s-inhibition", "name-mover"): "q",
    ("s-inhibition", "backup-name-mover"): "q",
    ("negative-name-mover", "logits"): "",
    ("name-mover", "logits"): "",
    ("backup-name-mover", "logits"): "",
}


def _head(t) -> str:
    return f"a{t[0]}.h{t[1]}"


def ioi_edges(n_layers: int = 12) -> list[str]:
    edges = [edge_name("input", "logits")]
    for i in range(n_layers):  # every MLP kept whole
        edges += [edge_name("input", f"m{i}"), edge_name(f"m{i}", "logits")]
        edges += [edge_name(f"m{j}", f"m{i}") for j in range(i)]
    cls = {t: c for c, heads in IOI_CLASSES.items() for t in heads}
    for t, c in cls.items():
        h, layer = _head(t), t[0]
        edges += [edge_name("input", h, x) for x in IOI_CONNECTIONS.get(("input", c), "")]
        if (c, "logits") in IOI_CONNECTIONS:
            edges.append(edge_name(h, "logits"))
        edges += [edge_name(f"m{i}", h, x) for i in range(layer) for x in "qkv"]
        edges += [edge_name(h, f"m{i}") for i in range(layer, n_layers)]
        for t2, c2 in cls.items():
            if t2[0] > layer:
                edges += [edge_name(h, _head(t2), x) for x in IOI_CONNECTIONS.get((c, c2), "")]
    return edges


# ----------------------------------------------------------------------------- greater-than
GT_GROUPS = {  # Hanna et al. 2023 as simplified by ACDC: heads (layer, head), MLPs (layer, None)
    "early-heads-0305": [(0, 3), (0, 5)],
    "early-head-01": [(0, 1)],
    "early-mlps": [(0, None), (1, None), (2, None), (3, None)],
    "mid-heads": [(5, 5), (6, 1), (6, 9), (7, 10), (8, 11), (9, 1)],
    "late-mlps": [(8, None), (9, None), (10, None), (11, None)],
}
GT_CONNECTED = [("early-head-01", "early-mlps"), ("early-head-01", "mid-heads"), ("early-heads-0305", "mid-heads"),
                ("early-mlps", "mid-heads"), ("mid-heads", "late-mlps")]


def _gt_node(t) -> str:
    return f"m{t[0]}" if t[1] is None else _head(t)


def _into(t) -> list[tuple[str, str | None]]:
    return [(f"m{t[0]}", None)] if t[1] is None else [(_head(t), x) for x in "qkv"]


def greater_than_edges() -> list[str]:
    edges: list[str] = []
    for group in ("early-heads-0305", "early-head-01", "early-mlps"):
        for t in GT_GROUPS[group]:
            edges += [edge_name("input", d, x) for d, x in _into(t)]
    for group in ("mid-heads", "late-mlps"):
        edges += [edge_name(_gt_node(t), "logits") for t in GT_GROUPS[group]]
    for group in ("early-mlps", "late-mlps"):  # MLPs of a group are interconnected
        layers = [t[0] for t in GT_GROUPS[group]]
        edges += [edge_name(f"m{a}", f"m{b}") for a in layers for b in layers if a < b]
    for g1, g2 in GT_CONNECTED:
        for t1 in GT_GROUPS[g1]:
            for t2 in GT_GROUPS[g2]:
                # a head reaches the MLP of its own layer; otherwise the receiver is in a later layer
                if t1[0] < t2[0] or (t1[0] == t2[0] and t1[1] is not None and t2[1] is None):
                    edges += [edge_name(_gt_node(t1), d, x) for d, x in _into(t2)]
    last_mid = max(layer for layer, _ in GT_GROUPS["mid-heads"])
    edges += [edge_name(f"m{a}", f"m{b}") for a in range(last_mid) for b in range(a + 1, last_mid)]
    edges += [edge_name(f"m{i}", _head(t), "q") for t in GT_GROUPS["mid-heads"] for i in range(t[0])]
    return edges


# ----------------------------------------------------------------------------- docstring, induction
DOCSTRING_EDGES = [  # Heimersheim and Janiak 2023, ACDC appendix's 37-edge list without its internal edges
    "a0.h5->a1.h4<v>", "input->a0.h5<v>", "input->a2.h0<q>", "a0.h5->a2.h0<q>", "input->a2.h0<k>",
    "a0.h5->a2.h0<k>", "a1.h4->a2.h0<v>", "input->a1.h4<v>", "input->a1.h2<q>", "input->a1.h2<k>",
    "a0.h5->a1.h2<q>", "a0.h5->a1.h2<k>",
] + [e for h in (0, 6) for e in (
    f"a3.h{h}->logits", f"a1.h4->a3.h{h}<q>", f"input->a3.h{h}<v>", f"a0.h5->a3.h{h}<v>",
    f"a2.h0->a3.h{h}<k>", f"a1.h2->a3.h{h}<k>")]
DOCSTRING_CLASSES = {"a3.h0": "docstring-mover", "a3.h6": "docstring-mover", "a2.h0": "argument-mover",
                     "a1.h4": "previous-token", "a1.h2": "previous-token", "a0.h5": "token-info"}
INDUCTION_EDGES = ["input->a0.h0<v>", "input->a1.h6<q>", "a0.h0->a1.h6<k>", "input->a1.h6<v>", "input->logits",
                   "a1.h6->logits"]
INDUCTION_CLASSES = {"a0.h0": "previous-token", "a1.h6": "induction"}

ACDC = {"paper": "Conmy et al. 2023, Towards Automated Circuit Discovery for Mechanistic Interpretability",
        "url": "https://arxiv.org/abs/2304.14997", "where": "appendix: the canonical circuits' edge-level encoding"}
HYPOTHESIS_TESTS = "Shi et al. 2024, Hypothesis Testing the Circuit Hypothesis in LLMs (tables 1-4)"

CIRCUITS = {
    "ioi": dict(model=GPT2_SMALL, build=ioi_edges,
                classes={_head(t): c for c, hs in IOI_CLASSES.items() for t in hs},
                source={"paper": "Wang et al. 2023, Interpretability in the Wild: a Circuit for Indirect Object "
                                 "Identification in GPT-2 small", "url": "https://arxiv.org/abs/2211.00593",
                        "where": "figure 2 and section 3 (the seven head classes)"},
                task="indirect object identification; metric: logit difference of the indirect object over the "
                     "subject at the last position"),
    "greater-than": dict(model=GPT2_SMALL, build=greater_than_edges,
                         classes={_gt_node(t): c for c, ts in GT_GROUPS.items() for t in ts},
                         source={"paper": "Hanna et al. 2023, How does GPT-2 compute greater-than?",
                                 "url": "https://arxiv.org/abs/2305.00586",
                                 "where": "figure 1/section 3, as simplified by ACDC"},
                         task="'The war lasted from the year 1732 to the year 17': probability of years above 32 "
                              "minus below"),
    "docstring": dict(model=ATTN_ONLY_4L, build=lambda: list(DOCSTRING_EDGES), classes=DOCSTRING_CLASSES,
                      source={"paper": "Heimersheim and Janiak 2023, A circuit for Python docstrings in a 4-layer "
                                       "attention-only transformer (Alignment Forum)",
                              "url": "https://www.alignmentforum.org/posts/u6KXXmKFbXfWzoAXn/",
                              "where": "the circuit figure; ACDC's appendix lists its 37 edges"},
                      task="the next argument name in a Python docstring; metric: logit difference of the right "
                           "name over the best wrong one"),
    "induction": dict(model=REDWOOD_2L, build=lambda: list(INDUCTION_EDGES), classes=INDUCTION_CLASSES,
                      source={"paper": "Olsson et al. 2022, In-context Learning and Induction Heads",
                              "url": "https://arxiv.org/abs/2209.11895",
                              "where": "the mechanism; the edges are ACDC's zero-ablation circuit on Redwood's "
                                       "2-layer attention-only model"},
                      task="predict B after ... A B ... A; metric: log probability of the right token"),
}


def circuit_document(name: str) -> dict:
    spec = CIRCUITS[name]
    model = spec["model"]
    graph = Graph(model["n_layers"], model["n_heads"], has_mlp=not model["attn_only"])
    edges = list(dict.fromkeys(spec["build"]()))
    known = set(graph.edge_names)
    unknown = [e for e in edges if e not in known]
    if unknown:
        raise ValueError(f"{name}: edges not in the model's graph: {unknown[:3]}")
    order = {e: i for i, e in enumerate(graph.edge_names)}
    edges.sort(key=order.__getitem__)
    chosen = set(edges)
    nodes = {n for e in graph.edges if e.name in chosen for n in (e.src, e.dst)}
    node_order = {n: i for i, n in enumerate(graph.node_names)}
    return {
        "schema": "cbench/circuit/v1",
        "case": f"literature-{name}",
        "model_kind": "pretrained",
        "granularity": "qkv",
        "graph": {"n_layers": model["n_layers"], "n_heads": model["n_heads"], "has_mlp": not model["attn_only"],
                  "parallel_attn_mlp": False, "d_model": model["d_model"]},
        "nodes": sorted(nodes, key=node_order.__getitem__),
        "edges": edges,
        "node_classes": {n: c for n, c in sorted(spec["classes"].items(), key=lambda kv: node_order[kv[0]])},
        "model": {"name": model["name"], "positional_embedding_type": model["positional_embedding_type"]},
        "source": {**spec["source"], "edges_from": ACDC, "evaluated_in": HYPOTHESIS_TESTS},
        "task": spec["task"],
    }


def write_all(out_dir: Path = OUT_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in CIRCUITS:
        p = out_dir / f"{name}.json"
        p.write_text(json.dumps(circuit_document(name), indent=1) + "\n")
        paths.append(p)
    return paths


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    for p in write_all(args.out):
        print(p)


if __name__ == "__main__":
    main()
