"""The ground-truth circuit of a model drawn as a graph, with a method's top edges highlighted.

Nodes are laid out by position in the residual stream: ``input`` at the bottom, then per layer
its heads side by side and its MLP, ``logits`` on top. q/k/v edges are drawn as one edge into the
head (the letters they carry are in the edge's label in the legend). Edges:

* in the ground truth and in the method's top k (k = number of ground-truth edges): green;
* in the method's top k only (false positives): red;
* in the ground truth only (missed): black, dashed;
* all other edges of the graph: faint grey.

Written as SVG directly (no plotting library, no graphviz): deterministic, so the same inputs give
the same bytes, and about a millisecond a drawing (matplotlib took about a second).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from html import escape

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
    """The drawing as SVG bytes (``highlighted``: the method's top edges; None: the circuit alone).
    Written directly (no plotting library): the same inputs give the same bytes."""
    truth_h = {promote_edge_name(e) for e in truth}
    top = None if highlighted is None else {promote_edge_name(e) for e in highlighted}
    pos = node_positions(graph)
    xs = [p[0] for p in pos.values()]
    x0, rows = min(xs), 2 * graph.n_layers + 1
    sx, sy, margin, r = 86.0, 64.0, 46.0, 19.0
    legend_h = 44 if top is not None else 26
    width = int(margin * 2 + sx * (max(xs) - x0))
    width = max(width, 360)
    head_h = 22 if title else 6
    height = int(head_h + margin + sy * rows + legend_h)
    offset = (width - sx * (max(xs) - x0)) / 2

    def px(name: str) -> tuple[float, float]:
        x, y = pos[name]
        return offset + sx * (x - x0), head_h + 14 + sy * (rows - y)

    kinds = {"hit": ("#1a9850", 2.2, ""), "false": ("#d73027", 2.0, ""), "missed": ("#222222", 1.3, "5 4"),
             "other": ("#cccccc", 0.7, ""), "truth": ("#222222", 2.2, "")}
    edges = []
    for name in graph.head_edge_names:
        in_truth, in_top = name in truth_h, top is not None and name in top
        if in_truth and (top is None or in_top):
            kind = "truth" if top is None else "hit"
        elif in_top:
            kind = "false"
        elif in_truth:
            kind = "missed"
        else:
            kind = "other"
        edges.append((0 if kind == "other" else 1, name, kind))
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" class="circuit"><title>{escape(title or "circuit")}</title>'
            "<defs>")]
    for kind, (colour, _lw, _dash) in kinds.items():
        out.append(f'<marker id="a-{kind}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" '
                   f'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="{colour}"/></marker>')
    out.append("</defs>")
    if title:
        out.append(f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="12">{escape(title)}</text>')
    for _z, name, kind in sorted(edges):
        colour, lw, dash = kinds[kind]
        src, dst = name.split("->")
        (ax, ay), (bx, by) = px(src), px(dst)
        dx, dy = bx - ax, by - ay
        dist = math.hypot(dx, dy) or 1.0
        ux, uy = dx / dist, dy / dist
        sx0, sy0, ex, ey = ax + ux * r, ay + uy * r, bx - ux * (r + 1), by - uy * (r + 1)
        span = abs(pos[dst][1] - pos[src][1])
        if abs(dx) < 0.2 * sx and span > 1:  # a long edge within a column: an arc past the nodes between
            bend = (0.25 + 0.04 * min(span, 6)) * dist
            cx, cy = (sx0 + ex) / 2 + uy * bend, (sy0 + ey) / 2 - ux * bend
            path = f"M{sx0:.1f},{sy0:.1f} Q{cx:.1f},{cy:.1f} {ex:.1f},{ey:.1f}"
        else:
            path = f"M{sx0:.1f},{sy0:.1f} L{ex:.1f},{ey:.1f}"
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="{lw}"'
                   + (f' stroke-dasharray="{dash}"' if dash else "")
                   + f' marker-end="url(#a-{kind})" class="edge {kind}" data-edge="{escape(name, quote=True)}"/>')
    in_circuit = {n for e in truth_h for n in e.split("->")}
    for name in pos:
        node = graph.node(name)
        x, y = px(name)
        face = "#fee08b" if node.kind == "head" else "#abd9e9" if node.kind == "mlp" else "#e0e0e0"
        stroke, lw = ("#222222", 1.6) if name in in_circuit else ("#aaaaaa", 0.8)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{face}" stroke="{stroke}" stroke-width="{lw}"/>'
                   f'<text x="{x:.1f}" y="{y + 3:.1f}" text-anchor="middle" font-size="8.5">{escape(name)}</text>')
    k = len(truth_h)
    legend = ([("truth", "ground-truth edge"), ("other", "other edge")] if top is None else
              [("hit", f"top-{k} and in the circuit"), ("false", f"top-{k}, not in the circuit"),
               ("missed", "in the circuit, missed"), ("other", "other edge")])
    ly = height - legend_h + 8
    for i, (kind, text) in enumerate(legend):
        colour, lw, dash = kinds[kind]
        lx = 12 + (i % 2) * (width / 2)
        yy = ly + (i // 2) * 17
        out.append(f'<line x1="{lx:.0f}" y1="{yy}" x2="{lx + 26:.0f}" y2="{yy}" stroke="{colour}" stroke-width="{lw}"'
                   + (f' stroke-dasharray="{dash}"' if dash else "") + "/>"
                   f'<text x="{lx + 32:.0f}" y="{yy + 3}" font-size="10">{escape(text)}</text>')
    out.append("</svg>\n")
    return "".join(out).encode()
