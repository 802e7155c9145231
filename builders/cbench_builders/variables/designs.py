"""The variables tier's nine models: where each causal variable lives is known exactly, and it is
hard to find (three models per kind).

Every model reads ``n_inputs`` tokens (positions 1..n after BOS; vocabulary of ``V`` tokens),
copies each into its own residual slot with one head of layer 0 (``a0.h{i}`` reads position
``i + 1``), computes each variable as a lookup table over two input tokens with one MLP neuron per
combination of their values (an AND of two one-hot slots writing the variable's one-hot value),
and computes the output from the variables with one neuron per combination of their values in
the last MLP. The hand-set kit is the stress tier's (:mod:`cbench_builders.stress.kit`).

Kinds:

* ``shared``: two or three variables written by the same MLP ``m0``, each into its own
  subspace (one-hot slots): interchanging ``m0`` whole moves every variable at once;
* ``rotated``: a shared design whose whole residual stream is rotated by a seeded random
  orthogonal matrix (the model computes the same function; no variable is axis-aligned);
* ``spread``: a variable's values are written by several MLPs (each computes the variable on
  a part of its value set); another variable shares those MLPs.

Tables are drawn with the design's seed until every variable changes the output on at least
30 % of random interchanges (no variable is vacuous).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from cbench_builders.stress.kit import Kit

MIN_SENSITIVITY = 0.3


@dataclass
class VarDef:
    name: str
    reads: tuple[int, ...]  # input indices
    n_values: int
    layers: tuple[int, ...] = (0,)  # the MLPs that write it (values split between them in order)


@dataclass
class Design:
    name: str
    kind: str
    description: str
    vocab_size: int
    n_inputs: int
    n_layers: int
    variables: list[VarDef]
    seed: int
    rotate: bool = False
    kit: Kit | None = None
    tables: dict = field(default_factory=dict)
    out_table: np.ndarray | None = None
    rotation: np.ndarray | None = None
    records: list[dict] = field(default_factory=list)  # circuit.json's variables

    @property
    def out_layer(self) -> int:
        return self.n_layers - 1

    def high_level(self) -> dict:
        return {"kind": "variables", "inputs": list(range(1, self.n_inputs + 1)),
                "variables": [{"name": v.name, "reads": list(v.reads), "n_values": v.n_values,
                               "table": self.tables[v.name].tolist()} for v in self.variables],
                "output": {"reads": [v.name for v in self.variables], "table": self.out_table.tolist()}}


def _onehot(i: int, n: int) -> np.ndarray:
    x = np.zeros(n)
    x[i] = 1.0
    return x


def _sensitivity(d: Design, rng: np.random.Generator, n: int = 4000) -> dict[str, float]:
    """Share of random interchanges of each variable that change the output."""
    V = d.vocab_size
    xb = rng.integers(0, V, size=(n, d.n_inputs))
    xs = rng.integers(0, V, size=(n, d.n_inputs))

    def values(x):
        out = {}
        for v in d.variables:
            idx = np.zeros(n, dtype=np.int64)
            for r in v.reads:
                idx = idx * V + x[:, r]
            out[v.name] = d.tables[v.name][idx]
        return out

    def output(vals):
        idx = np.zeros(n, dtype=np.int64)
        for v in d.variables:
            idx = idx * v.n_values + vals[v.name]
        return d.out_table[idx]

    vb, vs = values(xb), values(xs)
    plain = output(vb)
    res = {}
    for v in d.variables:
        mixed = dict(vb)
        mixed[v.name] = vs[v.name]
        res[v.name] = float((output(mixed) != plain).mean())
    return res


def _draw_tables(d: Design) -> None:
    rng = np.random.default_rng(d.seed)
    V = d.vocab_size
    for _ in range(1000):
        for v in d.variables:
            n = V ** len(v.reads)
            t = np.concatenate([np.arange(v.n_values), rng.integers(0, v.n_values, n - v.n_values)])
            d.tables[v.name] = rng.permutation(t)  # every value occurs
        combos = int(np.prod([v.n_values for v in d.variables]))
        d.out_table = rng.integers(0, V, combos)
        if min(_sensitivity(d, rng).values()) >= MIN_SENSITIVITY:
            return
    raise ValueError(f"{d.name}: no tables with every variable sensitive")  # pragma: no cover


def _rotation(D: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    q, r = np.linalg.qr(rng.standard_normal((D, D)))
    return q * np.sign(np.diag(r))


def _rotate(kit: Kit, R: np.ndarray) -> None:
    """Rotate the residual basis: every residual vector ``h`` becomes ``h @ R``; weights that
    write into the stream are multiplied by ``R`` on the right, weights that read it by ``R^T``
    on the left, so the model computes the same function."""
    W = kit.W
    for k in list(W):
        if k in ("embed.W_E", "pos_embed.W_pos") or k.endswith(("attn.W_O", "attn.b_O", "mlp.W_out", "mlp.b_out")):
            W[k] = W[k] @ R
        elif k.endswith(("attn.W_Q", "attn.W_K", "attn.W_V")):
            W[k] = np.einsum("ed,hdk->hek", R.T, W[k])
        elif k.endswith("mlp.W_in") or k == "unembed.W_U":
            W[k] = R.T @ W[k]


def build(d: Design) -> Design:
    """Set the design's weights, tables and the variables' ground truth (``records``)."""
    _draw_tables(d)
    V = d.vocab_size
    n_slots = d.n_inputs + len(d.variables) + 1
    d_model = V + 2 + (d.n_inputs + 1) + n_slots * V
    n_neurons = [0] * d.n_layers
    for v in d.variables:
        for layer in v.layers:
            n_neurons[layer] += V ** len(v.reads)
    n_neurons[d.out_layer] += int(np.prod([v.n_values for v in d.variables]))
    kit = Kit([f"t{i}" for i in range(V)], n_ctx=d.n_inputs + 1, n_layers=d.n_layers, n_heads=d.n_inputs,
              d_head=V, d_mlp=max(n_neurons), d_model=d_model, name=d.name)
    for i in range(d.n_inputs):
        kit.head(0, i, attend=i + 1, read="tok", write=f"x{i}")
    for v in d.variables:
        parts = np.array_split(np.arange(v.n_values), len(v.layers))  # values each writer computes
        owner = {int(val): layer for layer, vals in zip(v.layers, parts) for val in vals}
        kit.slot(f"v_{v.name}")
        for combo in itertools.product(range(V), repeat=len(v.reads)):
            idx = 0
            for c in combo:
                idx = idx * V + c
            val = int(d.tables[v.name][idx])
            reads: dict = {}
            for r, c in zip(v.reads, combo):
                reads[f"x{r}"] = reads.get(f"x{r}", 0) + _onehot(c, V)
            kit.neuron(owner[val], reads, bias=-(len(v.reads) - 1.0), writes={f"v_{v.name}": _onehot(val, V)})
    for ci, combo in enumerate(itertools.product(*[range(v.n_values) for v in d.variables])):
        reads = {f"v_{v.name}": _onehot(a, V) for v, a in zip(d.variables, combo)}
        kit.neuron(d.out_layer, reads, bias=-(len(d.variables) - 1.0), writes={"out": _onehot(int(d.out_table[ci]), V)})
    kit.unembed("out", gain=4.0)
    R = np.eye(d_model)
    if d.rotate:
        R = _rotation(d_model, d.seed)
        _rotate(kit, R)
    d.kit, d.rotation = kit, (R if d.rotate else None)
    d.records = []
    for v in d.variables:
        s = kit.slots[f"v_{v.name}"]
        basis = R[s.start:s.start + v.n_values].T  # the value dimensions, in the (rotated) residual basis
        nodes = [f"m{layer}" for layer in v.layers]
        sharing = sorted({w.name for w in d.variables if w is not v and set(w.layers) & set(v.layers)})
        holds = ["+".join(nodes)] + [f"resid.{L}" for L in range(max(v.layers) + 1, d.out_layer + 1)]
        kind = "spread" if len(v.layers) > 1 else ("rotated" if d.rotate else "shared")
        d.records.append({"name": v.name, "kind": kind, "location": "+".join(nodes), "n_values": v.n_values,
                          "parts": [{"node": n, "basis": basis.tolist()} for n in nodes],
                          "holds": holds, "shares_component_with": sharing, "separates": bool(sharing),
                          "why": (f"its component(s) also hold {', '.join(sharing)}" if sharing else
                                  "its components hold nothing else: the full vector isolates it")})
    return d


def _designs() -> dict:
    def A(name, reads, n, layers=(0,)):
        return VarDef(name, reads, n, layers)

    specs = [
        Design("var-shared-1", "shared", "Two variables (A of x0,x1; B of x1,x2) written by one MLP, each in its own "
               "one-hot subspace; the output is a table of A and B.", 4, 3, 2, [A("A", (0, 1), 4), A("B", (1, 2), 4)], 101),
        Design("var-shared-2", "shared", "Three variables (A, B, C, each of two of three tokens) written by one MLP, "
               "each in its own subspace.", 3, 3, 2, [A("A", (0, 1), 3), A("B", (1, 2), 3), A("C", (0, 2), 3)], 102),
        Design("var-shared-3", "shared", "Two variables of the same two tokens written by one MLP in separate "
               "subspaces (five-token vocabulary).", 5, 2, 2, [A("A", (0, 1), 3), A("B", (0, 1), 4)], 103),
        Design("var-rotated-1", "rotated", "var-shared-1's mechanism in a residual basis rotated by a random "
               "orthogonal matrix: no variable is axis-aligned.", 4, 3, 2, [A("A", (0, 1), 4), A("B", (1, 2), 4)], 201,
               rotate=True),
        Design("var-rotated-2", "rotated", "Three variables sharing one MLP, in a rotated residual basis.", 3, 3, 2,
               [A("A", (0, 1), 3), A("B", (1, 2), 3), A("C", (0, 2), 3)], 202, rotate=True),
        Design("var-rotated-3", "rotated", "Two variables of the same two tokens sharing one MLP, in a rotated "
               "residual basis.", 5, 2, 2, [A("A", (0, 1), 3), A("B", (0, 1), 4)], 203, rotate=True),
        Design("var-spread-1", "spread", "A is written by two MLPs (m0 computes half of its values, m1 the other "
               "half); B shares m0.", 4, 3, 3, [A("A", (0, 1), 4, (0, 1)), A("B", (1, 2), 4, (0,))], 301),
        Design("var-spread-2", "spread", "A is written by three MLPs (m0, m1, m2, a third of its values each); B "
               "by two of them (m1, m2).", 3, 3, 4, [A("A", (0, 1), 3, (0, 1, 2)), A("B", (1, 2), 3, (1, 2))], 302),
        Design("var-spread-3", "spread", "A and B are both written by the same two MLPs, each on half of its "
               "values.", 4, 3, 3, [A("A", (0, 1), 4, (0, 1)), A("B", (1, 2), 4, (0, 1))], 303),
    ]
    return {d.name: d for d in specs}


DESIGN_NAMES = tuple(_designs())


def design(name: str) -> Design:
    """A freshly built design by name."""
    return build(_designs()[name])
