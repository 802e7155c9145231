"""Adversarial circuit evaluation (papers/adversarial-circuit-evaluation.txt).

For every clean input x (the split's base inputs) and every corrupted input x' (the split's
source inputs) — all N × S combinations, not only the dataset's pairs — the divergence between
the full model's output M(x) and the circuit's output C(x, x'), where every edge outside the
circuit is resample-ablated from x'. Categorical tasks use KL(M(x) ‖ C(x, x')) of the output
distributions; a sequence task averages it over the valid positions (BOS excluded). Numerical
tasks have no distribution, so they use the squared difference of the outputs (``l2``), averaged
the same way. Runs are batched: the sources' node outputs are computed once and each chunk of
(base × all sources) rows is one masked forward pass.

Reported: count, mean, std, min, the 25/50/75/95/99/99.9/99.99th percentiles and max, raw and
as z-scores ((value − mean) / std); the k worst pairs with both inputs and the model's and the
circuit's top output per position; and the sample size needed to bound a percentile
(:func:`cbench.scoring.statistics.percentile_sample_size`). As the paper notes, the N × S pairs
are not independent, so the exact bound applies to N i.i.d. inputs, not to N·S pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from cbench.errors import UsageError
from cbench.scoring.statistics import percentile_bound_confidence, percentile_sample_size

__all__ = ["PERCENTILES", "AdversarialResult", "pair_divergences", "summarize", "adversarial_evaluation",
           "sample_size"]

PERCENTILES = (25.0, 50.0, 75.0, 95.0, 99.0, 99.9, 99.99)


def pair_divergences(case, data, mask: np.ndarray, metric: str | None = None, max_rows: int = 4096) -> np.ndarray:
    """``[N, S]``: divergence of C(base_i, source_j) from M(base_i) for every pair."""
    from cbench.tasks import metrics as M

    rt = case.runtime
    name = metric or ("kl" if case.task_type == "categorical" else "l2")
    M.check_metric(name, case.task_type)
    if name not in ("kl", "l2"):
        raise UsageError(f"the adversarial evaluation compares with the model's outputs: kl or l2 (got {name!r})")
    mask_t = torch.as_tensor(np.asarray(mask, dtype=bool), dtype=torch.float32)
    base, source = data.base, data.source
    valid = getattr(data, "valid", None)
    N, S = int(base.shape[0]), int(source.shape[0])
    if base.shape[1] != source.shape[1]:
        raise UsageError("base and source inputs must have the same length for resample ablation")
    with torch.no_grad():
        clean = rt.clean(base)
        src_acts = rt.node_outputs(source)  # [F, S, P, D]
        out = np.empty((N, S), dtype=np.float64)
        per_chunk = max(1, max_rows // max(S, 1))
        for start in range(0, N, per_chunk):
            stop = min(N, start + per_chunk)
            c = stop - start
            tokens = base[start:stop].repeat_interleave(S, dim=0)
            ablated = src_acts.repeat(1, c, 1, 1)
            res = rt.run(tokens, edge_mask=mask_t, ablated=ablated).output
            ref = clean[start:stop].repeat_interleave(S, dim=0)
            v = None if valid is None else valid[start:stop].repeat_interleave(S, dim=0)
            metric_fn = M.make_metric(name, case.task_type, clean_outputs=ref, valid=v)
            out[start:stop] = metric_fn.per_example(res).double().cpu().numpy().reshape(c, S)
    return out


CONSTANT_RTOL = 1e-12  # std below this fraction of max |value|: the values are one constant


def summarize(values: np.ndarray) -> dict:
    """count, mean, std, min, percentiles, max — raw and as z-scores."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise UsageError("no values to summarize")
    mean, std = float(v.mean()), float(v.std())
    raw = {"count": int(v.size), "mean": mean, "std": std, "min": float(v.min())}
    for p in PERCENTILES:
        raw[f"{p:g}%"] = float(np.percentile(v, p))
    raw["max"] = float(v.max())
    # a constant vector's std is rounding noise (1e-17 of the scale, not 0): no z-scores then
    flat = std <= CONSTANT_RTOL * max(float(np.abs(v).max()), np.finfo(np.float64).tiny)
    z = {k: (None if flat else (val - mean) / std) for k, val in raw.items() if k not in ("count", "mean", "std")}
    return {"raw": raw, "z": z}


def sample_size(p: float = 0.99, confidence: float = 0.95, margin: float = 0.005) -> dict:
    """The exact sample size for an upper bound on the p-quantile, with the bound's confidence."""
    n = percentile_sample_size(p, confidence, margin)
    return {"percentile": p, "confidence": confidence, "margin": margin, "n": n,
            "order_statistic": int(math.ceil(round((p + margin) * n, 9))),
            "achieved_confidence": percentile_bound_confidence(n, p, margin)}


def _decode(ids, vocab) -> list:
    return [vocab[i] if vocab and 0 <= i < len(vocab) else int(i) for i in ids]


@dataclass
class AdversarialResult:
    summary: dict
    worst: list
    n_base: int
    n_source: int
    metric: str
    sample_size: dict | None
    values: np.ndarray

    def to_dict(self) -> dict:
        return {"metric": self.metric, "n_base": self.n_base, "n_source": self.n_source,
                "pairs": self.n_base * self.n_source, "summary": self.summary, "worst": self.worst,
                "sample_size": self.sample_size,
                "note": "all base x source combinations; pairs sharing an input are not independent"}


def adversarial_evaluation(case, data, mask: np.ndarray, k_worst: int = 10, metric: str | None = None,
                           percentile: float | None = 0.99, confidence: float = 0.95, margin: float = 0.005,
                           max_rows: int = 4096) -> AdversarialResult:
    mask = np.asarray(mask, dtype=bool)
    case.graph.check_mask(mask)
    if not mask.any():
        raise UsageError("the circuit is empty; there is nothing to evaluate")
    values = pair_divergences(case, data, mask, metric, max_rows)
    name = metric or ("kl" if case.task_type == "categorical" else "l2")
    flat = values.ravel()
    k = min(int(k_worst), flat.size)
    order = np.argsort(-flat, kind="stable")[:k]
    vocab = list(case.meta.get("input_tokens") or [])
    classes = case.meta.get("output_classes")
    worst = []
    if k:
        bi, si = np.unravel_index(order, values.shape)
        b = data.base[torch.as_tensor(bi)]
        s = data.source[torch.as_tensor(si)]
        rt = case.runtime
        with torch.no_grad():
            model_out = rt.clean(b)
            circ_out = rt.run(b, s, edge_mask=torch.as_tensor(mask, dtype=torch.float32)).output
        for r in range(k):
            entry = {"rank": r + 1, "base_index": int(bi[r]), "source_index": int(si[r]), "value": float(flat[order[r]]),
                     "base": _decode(b[r].tolist(), vocab), "source": _decode(s[r].tolist(), vocab)}
            if case.task_type == "categorical":
                entry["model_top"] = _decode(model_out[r].argmax(-1).tolist(), classes)
                entry["circuit_top"] = _decode(circ_out[r].argmax(-1).tolist(), classes)
            else:
                entry["model_output"] = [round(float(x), 6) for x in model_out[r, :, 0]]
                entry["circuit_output"] = [round(float(x), 6) for x in circ_out[r, :, 0]]
            worst.append(entry)
    ss = sample_size(percentile, confidence, margin) if percentile is not None else None
    return AdversarialResult(summarize(values), worst, int(values.shape[0]), int(values.shape[1]), name, ss, values)
