"""Which edges outside a stress model's circuit carry a true effect: each edge ablated alone, its
effect measured on the logits, and the reason for every edge that does not move them.

The dense-floor gate ``floor_share_above_resolution`` (:mod:`cbench.verify.mechanisms`) counts an
edge when its exact patching score (the mean KL its ablation adds) is at or above
``64 eps(float32)`` times the *largest* score, circuit edges included. KL is quadratic in a small
change of the logits: a floor edge that moves a logit by 1e-4 adds a KL of about 1e-8, under that
cutoff whenever a circuit edge scores above about 1e-3, although the edge has a real effect. Its
logits, though, move linearly, and float32 resolves a change in a logit down to a few
``eps * |logit|``. So the gate ``floor_share_moving_logits`` measures each outside edge by the
largest change of any logit over the valid positions of the pairs, ``max |logits(edge ablated) -
logits(clean)|``, and counts it when that is at or above

    resolution = LOGIT_RESOLUTION_FACTOR * eps(float32) * max |clean logit|

with the same factor 64 as the scores' rule (:mod:`cbench.scoring.resolution`). The rounding of the
pass itself is measured, not assumed: the same pass with every edge's ablated value set to its
clean value (every true effect exactly 0, only the order of the sums differs from the clean run)
moves the logits by at most 2 eps x max|logit| on the 23 dense-floor models
(``benchmarks/bench_stress_floor_share.py``; docs/stress-tier.md).

An edge below the resolution gets the first reason that holds (the ``reasons`` of
:class:`FloorShare`):

* ``source_unchanged``: the edge's source writes the same in base and source (its resample
  ablation changes nothing it sends);
* ``key_change_uniform``: a k edge whose source's change is the same at every position (a head
  that reads one fixed position writes the same at every query): it adds one number to every
  score of a query's row, and softmax is invariant to that;
* ``attention_fixed``: any other q or k edge into a head whose result does not move (its attention
  does not follow the change: a saturated pattern, or a query or key the change does not reach);
* ``destination_ignores``: a v edge, or an edge into an MLP or the logits, whose destination's
  output does not move (it does not read what the source's change writes);
* ``downstream_below_resolution``: the destination's output moves, but the logits by less than
  the resolution (nothing after it reads the change, or reads it too weakly for float32).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

#: the logit resolution's factor, in units of eps(float32) x max |clean logit| (the scores' factor)
LOGIT_RESOLUTION_FACTOR = 64
_EPS32 = float(np.finfo(np.float32).eps)
REASONS = ("source_unchanged", "key_change_uniform", "attention_fixed", "destination_ignores", "downstream_below_resolution")


@dataclass(frozen=True)
class FloorShare:
    """Per outside edge, its largest logit change and, below the resolution, why."""

    edges: list[str]
    kinds: list[str]  #: q, k, v (into a head), mlp, logits
    logit_change: np.ndarray  #: max |delta logit| over valid positions, per edge
    resolution: float  #: LOGIT_RESOLUTION_FACTOR x eps(float32) x max |clean logit|
    reasons: dict[str, str] = field(default_factory=dict)  #: edge -> reason, for edges below it

    @property
    def moving(self) -> np.ndarray:
        return self.logit_change >= self.resolution

    @property
    def share(self) -> float:
        return float(self.moving.mean()) if self.edges else 1.0

    def reason_counts(self) -> dict[str, int]:
        out = {r: 0 for r in REASONS}
        for r in self.reasons.values():
            out[r] += 1
        return {r: n for r, n in out.items() if n}

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (edges moving the logits, edges)."""
        out: dict[str, list[int]] = {}
        for k, m in zip(self.kinds, self.moving.tolist()):
            row = out.setdefault(k, [0, 0])
            row[0] += int(m)
            row[1] += 1
        return {k: (a, b) for k, (a, b) in out.items()}

    def detail(self) -> str:
        kinds = ", ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(self.by_kind().items()))
        reasons = ", ".join(f"{r} {n}" for r, n in self.reason_counts().items())
        return (f"{int(self.moving.sum())} of {len(self.edges)} outside edges move a logit by >= {self.resolution:.3g}"
                f" ({kinds})" + (f"; the rest: {reasons}" if reasons else ""))


def edge_kind(graph, name: str) -> str:
    """``q``, ``k`` or ``v`` (into a head), ``mlp`` or ``logits``: what the edge feeds."""
    e = graph.edge(name)
    if e.qkv:
        return e.qkv
    return "logits" if graph.node(e.dst).kind == "logits" else "mlp"


def logit_resolution(clean: torch.Tensor, valid: torch.Tensor) -> float:
    """``LOGIT_RESOLUTION_FACTOR * eps(float32) * max |clean logit|`` over the valid positions."""
    top = float(clean[valid].abs().max()) if bool(valid.any()) else 0.0
    return LOGIT_RESOLUTION_FACTOR * _EPS32 * top


def logit_change(out: torch.Tensor, clean: torch.Tensor, valid: torch.Tensor) -> np.ndarray:
    """Per row of ``out [e, B, P, V]``: the largest ``|out - clean|`` over the valid positions."""
    d = (out - clean.unsqueeze(0)).abs().amax(-1)  # [e, B, P]
    return torch.where(valid.unsqueeze(0), d, torch.zeros_like(d)).flatten(1).amax(1).double().numpy()


def source_changes(rt, acts: torch.Tensor, ablated: torch.Tensor, edges: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per edge: the largest change of what its source sends (ablated minus clean output), and how
    much that change differs between the positions of one example."""
    if not edges:
        return np.zeros(0), np.zeros(0)
    g = rt.graph
    src_rows = g.edge_forward[np.asarray([g.edge_index(e) for e in edges], dtype=np.int64)]
    change = ablated.expand_as(acts) - acts
    sent = change.abs().flatten(1).amax(1).double().numpy()[src_rows]
    spread = (change - change[:, :, :1]).abs().flatten(1).amax(1).double().numpy()[src_rows]
    return sent, spread


@torch.no_grad()
def measure(rt, acts: torch.Tensor, ablated: torch.Tensor, clean: torch.Tensor, valid: torch.Tensor,
            edges: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per edge (ablated alone, by :func:`cbench.verify.edge_patching.single_edge_effects`): the
    largest logit change over valid positions and the largest change of the destination's own
    output."""
    from cbench.verify.edge_patching import single_edge_effects

    g = rt.graph
    logit = np.zeros(len(edges))
    dest = np.zeros(len(edges))
    for rows, out, moved in single_edge_effects(rt, acts, ablated, [g.edge_index(e) for e in edges]):
        logit[rows] = logit_change(out, clean, valid)
        dest[rows] = moved.double().numpy()
    return logit, dest


def floor_share(rt, acts: torch.Tensor, ablated: torch.Tensor, clean: torch.Tensor, valid: torch.Tensor,
                edges: Sequence[str], measured: tuple[np.ndarray, np.ndarray] | None = None) -> FloorShare:
    """The outside edges' logit changes against the logit resolution, and the reason for each edge
    below it. A destination counts as moved when its output changes by at least the same factor of
    eps(float32) times its largest clean output (the logits' rule, applied to that node).
    ``measured``: :func:`measure`'s ``(logit change, destination change)`` of ``edges`` when the
    caller's pass already has them."""
    g = rt.graph
    edges = list(edges)
    logit, dest = measured if measured is not None else measure(rt, acts, ablated, clean, valid, edges)
    sent, spread = source_changes(rt, acts, ablated, edges)
    res = logit_resolution(clean, valid)
    kinds = [edge_kind(g, e) for e in edges]
    scale = acts.abs().flatten(1).amax(1).double().numpy()  # each node's largest clean output
    reasons: dict[str, str] = {}
    for i, e in enumerate(edges):
        if logit[i] >= res:
            continue
        if sent[i] == 0:
            reasons[e] = "source_unchanged"
            continue
        dst = g.edge(e).dst
        dest_res = res if kinds[i] == "logits" else LOGIT_RESOLUTION_FACTOR * _EPS32 * scale[g.forward_index(dst)]
        src_res = LOGIT_RESOLUTION_FACTOR * _EPS32 * scale[g.forward_index(g.edge(e).src)]
        if dest[i] <= dest_res and kinds[i] == "k" and spread[i] <= src_res:
            reasons[e] = "key_change_uniform"
        elif dest[i] <= dest_res:
            reasons[e] = "attention_fixed" if kinds[i] in ("q", "k") else "destination_ignores"
        else:
            reasons[e] = "downstream_below_resolution"
    return FloorShare(edges, kinds, logit, res, reasons)
