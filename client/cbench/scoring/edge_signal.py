"""Ground-truth edges that cannot carry signal, and which ones scoring leaves out.

Some edges of a correct ground truth can never be detected by ablating them, because ablation
changes nothing that the destination reads: on Tracr models, a head whose query or key reads only
the positional embedding (``input->a1.h0<q>`` of ``frac_prevs``) gets the same positions from a
resampled source of the same length. An exact oracle gives such an edge score 0, tied with every
edge outside the circuit, so it could not reach AUROC 1.0 while they count as positives.

Where the marks come from, in order:

1. the circuit's own ``edge_signal`` field (``{"<edge>": {"signal": false, "why": "..."}}``; only
   marked edges are listed), when present -- the release step writes it;
2. otherwise, derived from the model's behaviour by :func:`derive_no_signal`: a ground-truth
   q/k/v edge carries no signal when ablating it alone (the ablation scoring uses, on the scoring
   data) changes no output at any valid position beyond float rounding (``|delta| <= rtol x``
   the largest |output|). Every model kind is treated the same way; on trained models this
   marks only edges that are dead exactly.

Scoring (:func:`cbench.scoring.ground_truth.score_against_truth`) leaves the marked edges out of
the edge ROC unless asked to include them (``--include-no-signal``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch

__all__ = ["marked_no_signal", "derive_no_signal", "no_signal_edges", "signal_summary", "RTOL"]

RTOL = 1e-5  # relative to the largest |output|: what float32 rounding of the masked sum can move


def marked_no_signal(circuit: Mapping | None) -> dict[str, str] | None:
    """``{edge: why}`` for the circuit's edges marked ``"signal": false``; None when the circuit
    has no ``edge_signal`` field (nothing was decided)."""
    if not isinstance(circuit, Mapping) or not isinstance(circuit.get("edge_signal"), Mapping):
        return None
    return {name: str(mark.get("why", "")) for name, mark in circuit["edge_signal"].items()
            if isinstance(mark, Mapping) and mark.get("signal") is False}


def derive_no_signal(runtime, data, edges: Iterable[str], ablation: str = "resample",
                     rtol: float = RTOL) -> dict[str, str]:
    """``{edge: why}`` for the q/k/v edges of ``edges`` whose ablation alone changes no output on
    ``data`` (head-level names are skipped). One masked pass per chunk of edges."""
    graph = runtime.graph
    names = [n for n in dict.fromkeys(edges) if graph.has_edge(n)]
    if not names:
        return {}
    base = runtime.tokens_tensor(data.base)
    with torch.no_grad():
        ablated = runtime.ablated_outputs(base, data.source, ablation, reference=data.source)
        masks = torch.ones(len(names) + 1, graph.n_edges, dtype=runtime.dtype)
        for i, n in enumerate(names, start=1):
            masks[i, graph.edge_index(n)] = 0.0
        outs = runtime.run_masks(base, masks, ablated=ablated).double()  # row 0: nothing ablated
    valid = torch.as_tensor(data.valid, dtype=torch.bool)
    ref = outs[0][valid]
    scale = max(float(ref.abs().max()), 1e-30) if ref.numel() else 1.0
    out = {}
    for i, n in enumerate(names, start=1):
        delta = float((outs[i][valid] - ref).abs().max()) if ref.numel() else 0.0
        if delta <= rtol * scale:
            out[n] = (f"ablated alone ({ablation}, {data.n_examples} pairs, {data.split}) it changes no output "
                      f"(largest change {delta:.1e}, outputs up to {scale:.2g})")
    return out


def no_signal_edges(circuit: Mapping | None, runtime=None, data=None, edges: Iterable[str] = (),
                    ablation: str = "resample") -> tuple[dict[str, str], str]:
    """(``{edge: why}``, where from): the circuit's marks when it has them, else derived from the
    model's behaviour on ``data`` (``"circuit"``, ``"derived"``); ``({}, "none")`` when neither."""
    marks = marked_no_signal(circuit)
    if marks is not None:
        return marks, "circuit"
    if runtime is None or data is None:
        return {}, "none"
    return derive_no_signal(runtime, data, edges, ablation), "derived"


def signal_summary(marks: Mapping[str, str], origin: str) -> str:
    """One line for the CLI."""
    if not marks:
        return f"no ground-truth edge is marked as carrying no signal ({origin})"
    names = ", ".join(sorted(marks))
    return f"{len(marks)} ground-truth edge(s) carry no signal ({origin}): {names}"
