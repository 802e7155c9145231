"""The ground-truth circuit of a model drawn as a graph, with a method's top edges highlighted.

Nodes are laid out by position in the residual stream: ``input`` at the bottom, then per layer
its heads side by side and its MLP, ``logits`` on top. q/k/v edges are drawn as one edge into the
head (the letters they carry are in the edge's label in the legend). Edges:

* in the ground truth and in the method's top k (k = number of ground-truth edges): green;
* in the method's top k only (false positives): red;
* in the ground truth only (missed): black, dashed;
* all other edges of the graph: faint grey.

Drawn with matplotlib (no graphviz); deterministic, so the same inputs give the same PNG bytes.
"""

from __future__ import annotations

import io
from typing import Iterable, Mapping

import numpy as np

from cbench.graph.graph import Graph, promote_edge_name


def node_positions(graph: Graph) -> dict[str, tuple[float, float]]:
    """x, y of every node: one row per attention sub-layer and per MLP, heads spread out."""
    pos: dict[str, tuple[float, float]] = {}
    width = max(1, graph.n_heads - 1)
    for node in graph.nodes:
        if node.kind == "input":
            pos[node.name] = (width / 2, 0.0)
        elif node.kind == "logits":
            pos[node.name] = (width / 2, 2.0 * graph.n_layers + 1)
        elif node.kind == "head":
            pos[node.name] = (float(node.head), 2.0 * node.layer + 1)
        else:  # mlp: beside the heads' row above them (parallel blocks share the row)
            y = 2.0 * node.layer + (1 if graph.parallel_attn_mlp else 2)
            pos[node.name] = (width / 2 + (width / 2 + 0.8 if graph.parallel_attn_mlp else 0), y)
    return pos


def top_edges(graph: Graph, doc: Mapping, k: int, signed: bool = False) -> set[str]:
    """The ``k`` edges with the highest |score| (signed for mask-logit methods), promoted to heads."""
    names = list(graph.edge_names)
    scores = np.array([float(doc["edges"][n]["score"]) for n in names])
    key = scores if signed else np.abs(scores)
    order = sorted(range(len(names)), key=lambda i: (-key[i], i))  # ties: graph order, deterministic
    out: set[str] = set()
    for i in order:
        if len(out) >= k:
            break
        out.add(promote_edge_name(names[i]))
    return out


def draw_circuit(graph: Graph, truth: Iterable[str], highlighted: Iterable[str] | None = None,
                 title: str = "") -> bytes:
    """The PNG bytes of the drawing (``highlighted``: the method's top edges; None: the circuit alone)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    truth_h = {promote_edge_name(e) for e in truth}
    top = None if highlighted is None else {promote_edge_name(e) for e in highlighted}
    pos = node_positions(graph)
    xs = [p[0] for p in pos.values()]
    fig_w = max(5.2, 1.2 * (max(xs) - min(xs)) + 2.5)
    fig_h = max(4.2, 0.8 * (2 * graph.n_layers + 1) + 1.8)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h), dpi=90)
    styles = []
    for name in graph.head_edge_names:
        src, dst = name.split("->")
        in_truth = name in truth_h
        in_top = top is not None and name in top
        if in_truth and (top is None or in_top):
            style = dict(color="#1a9850" if top is not None else "#222222", lw=2.2, ls="-", zorder=3)
        elif in_top:
            style = dict(color="#d73027", lw=2.0, ls="-", zorder=3)
        elif in_truth:
            style = dict(color="#222222", lw=1.3, ls=(0, (4, 3)), zorder=2)
        else:
            style = dict(color="#cccccc", lw=0.6, ls="-", zorder=1)
        styles.append((src, dst, style))
    for src, dst, style in sorted(styles, key=lambda s: s[2]["zorder"]):
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        span = y1 - y0
        rad = 0.0 if abs(x1 - x0) > 0.2 or span <= 1 else 0.25 + 0.04 * min(span, 6)  # arcs past nodes in a column
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), connectionstyle=f"arc3,rad={rad}", arrowstyle="-|>",
                                     mutation_scale=8, shrinkA=13, shrinkB=13, color=style["color"], lw=style["lw"],
                                     linestyle=style["ls"], zorder=style["zorder"]))
    in_circuit_nodes = {n for e in truth_h for n in e.split("->")}
    for name, (x, y) in pos.items():
        node = graph.node(name)
        face = "#fee08b" if node.kind == "head" else "#abd9e9" if node.kind == "mlp" else "#e0e0e0"
        ax.scatter([x], [y], s=760, c=face, edgecolors="#222222" if name in in_circuit_nodes else "#aaaaaa",
                   linewidths=1.6 if name in in_circuit_nodes else 0.8, zorder=4)
        ax.text(x, y, name, ha="center", va="center", fontsize=6.5, zorder=5)
    if top is None:
        handles = [Line2D([], [], color="#222222", lw=2.2, label="ground-truth edge"),
                   Line2D([], [], color="#cccccc", lw=0.8, label="other edge")]
    else:
        handles = [Line2D([], [], color="#1a9850", lw=2.2, label=f"top-{len(truth_h)} and in the circuit"),
                   Line2D([], [], color="#d73027", lw=2.0, label=f"top-{len(truth_h)}, not in the circuit"),
                   Line2D([], [], color="#222222", lw=1.3, ls=(0, (4, 3)), label="in the circuit, missed"),
                   Line2D([], [], color="#cccccc", lw=0.8, label="other edge")]
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(-0.7, 2 * graph.n_layers + 1.7)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=9)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
