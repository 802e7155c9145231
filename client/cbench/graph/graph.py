"""The canonical computational graph of a transformer: nodes, edges and their indices.

Naming follows MIB / EAP-IG (see DESIGN.md, "Graph naming"):

* nodes: ``input`` (token + positional embedding), ``a{L}.h{H}`` (attention head),
  ``m{L}`` (MLP), ``logits``;
* edges: ``{src}->{dst}``, with ``<q>``, ``<k>`` or ``<v>`` appended when ``dst`` is a head.

Nodes are listed in the order a forward pass computes them, and edges are grouped by
destination in that same order (for a head: all ``<q>`` edges, then ``<k>``, then ``<v>``;
sources in node order). Indices are stable, so a circuit is also a boolean vector over
``graph.edges``.

For tensor work the graph also has the EAP-IG layout: *forward* slots (every node that writes
to the residual stream: input, heads, MLPs) and *backward* slots (every place that reads
from it: each head's q, k and v input, each MLP input, the logits). An edge is one
(forward, backward) pair; :meth:`Graph.to_matrix` scatters an edge vector into that matrix.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import numpy as np

from cbench.errors import GraphError, did_you_mean

QKV = ("q", "k", "v")

_HEAD_RE = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP_RE = re.compile(r"^m(\d+)$")
_EDGE_RE = re.compile(r"^(?P<src>[^<>]+?)->(?P<dst>[^<>]+?)(?:<(?P<qkv>[qkv])>)?$")


@dataclass(frozen=True)
class Node:
    """One node of the graph. ``layer`` is -1 for ``input`` and ``n_layers`` for ``logits``."""

    name: str
    kind: str  # "input" | "head" | "mlp" | "logits"
    layer: int
    head: int | None
    index: int


@dataclass(frozen=True)
class Edge:
    """One edge. ``qkv`` is the head input it feeds (``q``/``k``/``v``) or None."""

    name: str
    src: str
    dst: str
    qkv: str | None
    index: int
    forward: int  # row in the (forward x backward) matrix
    backward: int  # column in the (forward x backward) matrix


def edge_name(src: str, dst: str, qkv: str | None = None) -> str:
    return f"{src}->{dst}" + (f"<{qkv}>" if qkv else "")


def parse_edge_name(name: str) -> tuple[str, str, str | None]:
    """Split ``'a0.h1->a1.h0<v>'`` into ``('a0.h1', 'a1.h0', 'v')``."""
    m = _EDGE_RE.match(name.strip()) if isinstance(name, str) else None
    if not m:
        raise GraphError(f"{name!r} is not an edge name (expected 'src->dst' or 'src->dst<q|k|v>')")
    return m["src"], m["dst"], m["qkv"]


def promote_edge_name(name: str) -> str:
    """Drop the ``<q>/<k>/<v>`` detail: ``'input->a1.h0<q>'`` becomes ``'input->a1.h0'``."""
    src, dst, _ = parse_edge_name(name)
    return edge_name(src, dst)


# the largest graph cbench builds: Llama-3.1-8B (32 layers x 32 heads) has 1,592,881 edges. The
# graph holds one Python object per edge (about 340 bytes: Graph(32, 32) takes 8 s and 0.54 GB of
# host memory); the tensors a method needs on it are the memory plan's to refuse
# (cbench.runtime.memory_plan). Above 2 M edges (a 70B-sized model has about 40 M) the per-edge
# objects themselves would take several GB, so such a graph is refused here.
MAX_EDGES = 2_000_000

class Graph:
    """Nodes and edges of a transformer with ``n_layers`` layers of ``n_heads`` heads.

    ``has_mlp=False`` gives an attention-only model. ``parallel_attn_mlp=True`` (GPT-J style)
    means an MLP does not read the heads of its own layer.
    """

    def __init__(self, n_layers: int, n_heads: int, has_mlp: bool = True, parallel_attn_mlp: bool = False):
        if not (isinstance(n_layers, int) and n_layers >= 1 and isinstance(n_heads, int) and n_heads >= 1):
            raise GraphError(f"a graph needs n_layers >= 1 and n_heads >= 1 (got {n_layers}, {n_heads})")
        n_edges = self.edge_count(n_layers, n_heads, has_mlp)
        if n_edges > MAX_EDGES:
            raise GraphError(f"a model with {n_layers} layers x {n_heads} heads has {n_edges} edges, more than "
                             f"the {MAX_EDGES} cbench builds a graph for")
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.has_mlp = has_mlp
        self.parallel_attn_mlp = parallel_attn_mlp
        self._build()

    # ------------------------------------------------------------------ construction
    @staticmethod
    def edge_count(n_layers: int, n_heads: int, has_mlp: bool = True) -> int:
        """The number of edges of such a graph, counted without building it: every head input
        (q, k, v) and MLP input of layer l reads the input and every head and MLP of earlier layers
        (an MLP also the heads of its own layer); logits read everything."""
        m = 1 if has_mlp else 0
        per_layer = n_heads + m
        total = 0
        for layer in range(n_layers):
            upstream = 1 + layer * per_layer
            total += 3 * n_heads * upstream + m * (upstream + n_heads)
        return total + 1 + n_layers * per_layer

    @classmethod
    def from_config(cls, cfg) -> "Graph":
        """From a HookedTransformerConfig, its JSON dict, or an MIB graph ``cfg`` dict."""
        get = cfg.get if isinstance(cfg, Mapping) else (lambda k, d=None: getattr(cfg, k, d))
        has_mlp = not bool(get("attn_only", False))

        def whole(key):  # ints (numpy ints too); not None, strings, floats or booleans
            value = get(key)
            try:
                if isinstance(value, bool):
                    raise TypeError
                return operator.index(value)
            except TypeError:
                raise GraphError(f"a model config needs a whole number {key!r} (got {value!r})") from None

        return cls(whole("n_layers"), whole("n_heads"), has_mlp=has_mlp,
                   parallel_attn_mlp=bool(get("parallel_attn_mlp", False)))

    def _build(self) -> None:
        L, H = self.n_layers, self.n_heads
        nodes: list[Node] = [Node("input", "input", -1, None, 0)]
        forward: list[str] = ["input"]
        # forward slots: input, then per layer the heads then the MLP
        for layer in range(L):
            for h in range(H):
                nodes.append(Node(f"a{layer}.h{h}", "head", layer, h, len(nodes)))
                forward.append(f"a{layer}.h{h}")
            if self.has_mlp:
                nodes.append(Node(f"m{layer}", "mlp", layer, None, len(nodes)))
                forward.append(f"m{layer}")
        nodes.append(Node("logits", "logits", L, None, len(nodes)))
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.forward_nodes: tuple[str, ...] = tuple(forward)
        self._forward_index = {n: i for i, n in enumerate(forward)}

        # backward slots: per layer, q inputs of every head, then k, then v, then the MLP input
        backward: list[tuple[str, str | None]] = []
        per_layer = 3 * H + (1 if self.has_mlp else 0)
        for layer in range(L):
            for qkv in QKV:
                for h in range(H):
                    backward.append((f"a{layer}.h{h}", qkv))
            if self.has_mlp:
                backward.append((f"m{layer}", None))
        backward.append(("logits", None))
        self.backward_slots: tuple[tuple[str, str | None], ...] = tuple(backward)
        self._backward_index = {slot: i for i, slot in enumerate(backward)}
        self._per_layer_backward = per_layer

        edges: list[Edge] = []
        for node in self.nodes[1:]:
            srcs = self._sources_of(node)
            qkvs = QKV if node.kind == "head" else (None,)
            for qkv in qkvs:
                col = self._backward_index[(node.name, qkv)]
                for src in srcs:
                    name = edge_name(src, node.name, qkv)
                    edges.append(Edge(name, src, node.name, qkv, len(edges), self._forward_index[src], col))
        self.edges: tuple[Edge, ...] = tuple(edges)
        self._edge_index = {e.name: e.index for e in edges}
        self._node_index = {n.name: n.index for n in self.nodes}

    def _sources_of(self, node: Node) -> list[str]:
        """Every forward node whose output reaches ``node``'s input through the residual stream."""
        srcs = ["input"]
        for layer in range(min(node.layer, self.n_layers)):
            srcs += [f"a{layer}.h{h}" for h in range(self.n_heads)]
            if self.has_mlp:
                srcs.append(f"m{layer}")
        if node.kind == "mlp" and not self.parallel_attn_mlp:
            srcs += [f"a{node.layer}.h{h}" for h in range(self.n_heads)]
        return srcs

    # ------------------------------------------------------------------ sizes and look-ups
    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def n_forward(self) -> int:
        return len(self.forward_nodes)

    @property
    def n_backward(self) -> int:
        return len(self.backward_slots)

    @cached_property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @cached_property
    def edge_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.edges)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[self._node_index[name]]
        except (KeyError, TypeError):
            raise GraphError(f"node {name!r} is not in this model's graph ({self.describe()})"
                             + did_you_mean(str(name), self._node_index)) from None

    def edge(self, name: str) -> Edge:
        return self.edges[self.edge_index(name)]

    def edge_index(self, name: str) -> int:
        try:
            return self._edge_index[name]
        except (KeyError, TypeError):
            raise GraphError(f"edge {name!r} is not in this model's graph ({self.describe()})"
                             + did_you_mean(str(name), self._edge_index)) from None

    def has_edge(self, name: str) -> bool:
        return name in self._edge_index

    def has_node(self, name: str) -> bool:
        return name in self._node_index

    def forward_index(self, node: str) -> int:
        try:
            return self._forward_index[node]
        except KeyError:
            raise GraphError(f"{node!r} writes nothing to the residual stream in this graph") from None

    def backward_index(self, node: str, qkv: str | None = None) -> int:
        try:
            return self._backward_index[(node, qkv)]
        except KeyError:
            raise GraphError(f"{node!r}{'<' + qkv + '>' if qkv else ''} reads nothing in this graph") from None

    def describe(self) -> str:
        kind = "attention-only" if not self.has_mlp else "with MLPs"
        return f"{self.n_layers} layers x {self.n_heads} heads, {kind}"

    @property
    def cfg(self) -> dict:
        """The MIB graph-file ``cfg`` block (without ``d_model``, which the caller knows)."""
        return {"n_layers": self.n_layers, "n_heads": self.n_heads,
                "parallel_attn_mlp": self.parallel_attn_mlp, "has_mlp": self.has_mlp}

    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and self.cfg == other.cfg

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.cfg.items())))

    def __repr__(self) -> str:
        return f"Graph({self.describe()}: {self.n_nodes} nodes, {self.n_edges} edges)"

    # ------------------------------------------------------------------ vectors and matrices
    @cached_property
    def edge_forward(self) -> np.ndarray:
        """Forward-slot index of each edge's source, in edge order."""
        return np.fromiter((e.forward for e in self.edges), dtype=np.int64, count=self.n_edges)

    @cached_property
    def edge_backward(self) -> np.ndarray:
        """Backward-slot index of each edge's destination input, in edge order."""
        return np.fromiter((e.backward for e in self.edges), dtype=np.int64, count=self.n_edges)

    @cached_property
    def real_edge_matrix(self) -> np.ndarray:
        """Boolean (n_forward, n_backward): True where a (source, destination) pair is an edge."""
        m = np.zeros((self.n_forward, self.n_backward), dtype=bool)
        m[self.edge_forward, self.edge_backward] = True
        return m

    @cached_property
    def source_blocks(self) -> tuple[tuple[int, int, int], ...]:
        """``(n_sources, first, stop)`` per run of backward slots ``first:stop`` whose sources are
        exactly the first ``n_sources`` forward slots (a transformer's destinations read every node
        of the layers before them, so the edges fill a staircase of the (forward, backward)
        matrix). A product that only needs edge entries can skip the empty part above the stairs.
        Empty when some destination's sources are not such a prefix."""
        m = self.real_edge_matrix
        counts = m.sum(0)
        prefix = np.arange(self.n_forward)[:, None] < counts[None, :]
        if not np.array_equal(m, prefix):
            return ()
        blocks: list[tuple[int, int, int]] = []
        for k, n in enumerate(counts.tolist()):
            if blocks and blocks[-1][0] == n and blocks[-1][2] == k:
                blocks[-1] = (n, blocks[-1][1], k + 1)
            else:
                blocks.append((n, k, k + 1))
        return tuple(blocks)

    def mask(self, edges: Iterable[str]) -> np.ndarray:
        """Boolean vector over ``self.edges``, True for the named edges."""
        out = np.zeros(self.n_edges, dtype=bool)
        for name in edges:
            out[self.edge_index(name)] = True
        return out

    def edges_of_mask(self, mask: Sequence[bool] | np.ndarray) -> list[str]:
        """Names of the edges where ``mask`` is true (the inverse of :meth:`mask`)."""
        mask = np.asarray(mask)
        self.check_mask(mask)
        return [self.edges[i].name for i in np.flatnonzero(mask)]

    def check_mask(self, mask) -> None:
        shape = tuple(getattr(mask, "shape", (len(mask),)))
        if shape[-1:] != (self.n_edges,):
            raise GraphError(f"an edge mask for this model has {self.n_edges} entries, got shape {shape}")

    def to_matrix(self, values, fill=0):
        """Scatter a vector over edges into a (n_forward, n_backward) matrix (numpy or torch)."""
        self.check_mask(values)
        if hasattr(values, "new_full"):  # torch tensor
            import torch

            out = values.new_full(values.shape[:-1] + (self.n_forward, self.n_backward), fill)
            f = torch.as_tensor(self.edge_forward, device=values.device)
            b = torch.as_tensor(self.edge_backward, device=values.device)
            out[..., f, b] = values
            return out
        values = np.asarray(values)
        out = np.full(values.shape[:-1] + (self.n_forward, self.n_backward), fill, dtype=values.dtype)
        out[..., self.edge_forward, self.edge_backward] = values
        return out

    def from_matrix(self, matrix):
        """Gather the edge vector back out of a (n_forward, n_backward) matrix."""
        return matrix[..., self.edge_forward, self.edge_backward]

    # ------------------------------------------------------------------ circuits
    def nodes_of(self, edges: Iterable[str]) -> set[str]:
        """The nodes an edge set touches (both ends of every edge)."""
        out: set[str] = set()
        for name in edges:
            e = self.edge(name)
            out.add(e.src)
            out.add(e.dst)
        return out

    @cached_property
    def head_edge_names(self) -> tuple[str, ...]:
        """Edge names after q/k/v promotion, in first-occurrence order."""
        return tuple(dict.fromkeys(promote_edge_name(n) for n in self.edge_names))

    def promote(self, edges: Iterable[str]) -> set[str]:
        """Promote q/k/v edges to head edges (``input->a1.h0<q>`` -> ``input->a1.h0``)."""
        out = set()
        for name in edges:
            self.edge_index(name)  # refuses names not in the graph
            out.add(promote_edge_name(name))
        return out

    def promote_scores(self, scores, reduce: str = "max_abs") -> dict[str, float]:
        """Head-level scores from q/k/v-level scores: the entry of largest magnitude (``max_abs``),
        the ``max`` or the ``sum`` of the three."""
        scores = np.asarray(scores, dtype=np.float64)
        self.check_mask(scores)
        out: dict[str, float] = {}
        for e, s in zip(self.edges, scores):
            key = edge_name(e.src, e.dst)
            if key not in out:
                out[key] = float(s)
            elif reduce == "sum":
                out[key] += float(s)
            elif reduce == "max":
                out[key] = max(out[key], float(s))
            elif abs(s) > abs(out[key]):
                out[key] = float(s)
        return out

    def prune_dangling(self, mask) -> np.ndarray:
        """The edges of ``mask`` that lie on an ``input`` -> ``logits`` path of ``mask`` (MIB's and
        EAP-IG's pruning): an edge is kept when ``input`` reaches its source and its destination
        reaches ``logits`` through kept edges. One forward and one backward sweep suffice, since
        edges are grouped by destination in computation order; the result is its own fixpoint."""
        mask = np.asarray(mask, dtype=bool)
        self.check_mask(mask)
        ends = self._edge_ends
        if ends is not None:  # the same sweeps over node indices (MIB's AUROC prunes many masks)
            src, dst, src_a, dst_a, n_nodes, i_input, i_logits = ends
            keep = mask.tolist()
            reached = [False] * n_nodes
            reached[i_input] = True
            for s, d, k in zip(src, dst, keep):
                if k and reached[s]:
                    reached[d] = True
            leads = [False] * n_nodes
            leads[i_logits] = True
            for s, d, k in zip(reversed(src), reversed(dst), reversed(keep)):
                if k and leads[d]:
                    leads[s] = True
            return mask & np.array(reached)[src_a] & np.array(leads)[dst_a]
        from_input = {"input"}
        for e, keep in zip(self.edges, mask):
            if keep and e.src in from_input:
                from_input.add(e.dst)
        to_logits = {"logits"}
        for e, keep in zip(reversed(self.edges), mask[::-1]):
            if keep and e.dst in to_logits:
                to_logits.add(e.src)
        return np.fromiter(((m and e.src in from_input and e.dst in to_logits) for e, m in zip(self.edges, mask)),
                           dtype=bool, count=self.n_edges)

    @cached_property
    def _edge_ends(self):
        """Each edge's source and destination as node indices (lists and arrays), the node count
        and the indices of ``input`` and ``logits`` (None when an end is not a node)."""
        idx = {n.name: i for i, n in enumerate(self.nodes)}
        if "input" not in idx or "logits" not in idx or any(e.src not in idx or e.dst not in idx for e in self.edges):
            return None
        src = [idx[e.src] for e in self.edges]
        dst = [idx[e.dst] for e in self.edges]
        return src, dst, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), len(idx), idx["input"], idx["logits"]

    def node_mask_to_edge_mask(self, nodes: Iterable[str]) -> np.ndarray:
        """Edges whose both ends are in ``nodes`` (the node-SP rule); ``input``/``logits`` are
        always considered present."""
        keep = {"input", "logits"} | {self.node(n).name for n in nodes}
        return np.fromiter(((e.src in keep and e.dst in keep) for e in self.edges), dtype=bool,
                           count=self.n_edges)

    # ------------------------------------------------------------------ hook-style names
    def from_hook_edge(self, parent: str, child: str) -> str | None:
        """Canonical edge for an InterpBench/ACDC hook-style (parent, child) pair.

        Returns None for edges internal to a head (``hook_q_input[h] -> attn.hook_q[h]`` and
        ``attn.hook_q[h] -> attn.hook_result[h]``), which the canonical graph does not have.
        """
        p = _parse_hook(parent, self.n_layers)
        c = _parse_hook(child, self.n_layers)
        if p is None or c is None:
            bad = parent if p is None else child
            raise GraphError(f"hook name {bad!r} is not one cbench can map onto the graph")
        (p_role, p_node), (c_role, c_node) = p, c
        if p_role == "internal" or c_role == "internal":
            return None
        if p_role != "out":
            raise GraphError(f"{parent!r} is not an output hook, so ({parent!r}, {child!r}) is not an edge")
        if c_role not in ("q", "k", "v", "in"):
            raise GraphError(f"{child!r} is not an input hook, so ({parent!r}, {child!r}) is not an edge")
        name = edge_name(p_node, c_node, c_role if c_role in QKV else None)
        self.edge_index(name)
        return name

    def to_hook_edge(self, name: str) -> tuple[str, str]:
        """InterpBench/ACDC hook-style (parent, child) pair for a canonical edge name."""
        e = self.edge(name)
        return _hook_out(e.src), _hook_in(e.dst, e.qkv, self.n_layers)


# ---------------------------------------------------------------------- hook name helpers
_IDX = r"\[(?:(?:\s*(?::|COL|None)\s*,){0,2}\s*(\d+)\s*)\]"
_HOOK_PATTERNS = [
    (re.compile(r"^blocks\.0\.hook_resid_pre$|^hook_embed$|^hook_pos_embed$"), "input"),
    (re.compile(r"^blocks\.(\d+)\.attn\.hook_result" + _IDX + "$"), "head_out"),
    (re.compile(r"^blocks\.(\d+)\.hook_mlp_out$"), "mlp_out"),
    (re.compile(r"^blocks\.(\d+)\.hook_([qkv])_input" + _IDX + "$"), "head_in"),
    (re.compile(r"^blocks\.(\d+)\.attn\.hook_([qkv])" + _IDX + "$"), "internal"),
    (re.compile(r"^blocks\.(\d+)\.hook_mlp_in$"), "mlp_in"),
    (re.compile(r"^blocks\.(\d+)\.hook_resid_post$"), "resid_post"),
]


def _parse_hook(name: str, n_layers: int):
    if not isinstance(name, str):
        return None
    name = name.strip()
    for pattern, kind in _HOOK_PATTERNS:
        m = pattern.match(name)
        if not m:
            continue
        if kind == "input":
            return "out", "input"
        if kind == "head_out":
            return "out", f"a{m[1]}.h{m[2]}"
        if kind == "mlp_out":
            return "out", f"m{m[1]}"
        if kind == "head_in":
            return m[2], f"a{m[1]}.h{m[3]}"
        if kind == "internal":
            return "internal", f"a{m[1]}.h{m[3]}"
        if kind == "mlp_in":
            return "in", f"m{m[1]}"
        if kind == "resid_post":
            return ("in", "logits") if int(m[1]) == n_layers - 1 else None
    return None


def _hook_out(node: str) -> str:
    if node == "input":
        return "blocks.0.hook_resid_pre"
    m = _HEAD_RE.match(node)
    if m:
        return f"blocks.{m[1]}.attn.hook_result[{m[2]}]"
    m = _MLP_RE.match(node)
    if m:
        return f"blocks.{m[1]}.hook_mlp_out"
    raise GraphError(f"{node!r} has no output hook")


def _hook_in(node: str, qkv: str | None, n_layers: int) -> str:
    if node == "logits":
        return f"blocks.{n_layers - 1}.hook_resid_post"
    m = _HEAD_RE.match(node)
    if m:
        return f"blocks.{m[1]}.hook_{qkv}_input[{m[2]}]"
    m = _MLP_RE.match(node)
    if m:
        return f"blocks.{m[1]}.hook_mlp_in"
    raise GraphError(f"{node!r} has no input hook")
