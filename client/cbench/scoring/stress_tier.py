"""Scoring on the stress tier: edge AUROC per ground-truth class, the method x mechanism table,
and whether each model card's predictions held.

A stress model's ``circuit.json`` labels every ground-truth edge with a class (``primary``,
``redundant``, ``backup``, ``negative``, ``cancelling``, ``saturated``, ``and``, ``distributed``)
and its model card (``meta.json`` ``predictions``) says, before any bench run, which methods
should fail on it: ``fail`` (edge AUROC at most 0.75), ``pass`` (at least 0.90) or ``partial``
(in between). On this tier every labelled edge is scored (only edges marked without signal in
``circuit.json`` are left out), and the calibration reference is the gated label itself: exact
single-edge patching is *expected* to fail on redundancy and backup, a required negative check
rather than a defect.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from cbench.graph.graph import Graph
from cbench.scoring.ground_truth import _edge_vector, signed_ranking
from cbench.scoring.resolution import floor_scores
from cbench.scoring.statistics import auroc

FAIL_AT_MOST = 0.75
PASS_AT_LEAST = 0.90


def is_stress(circuit: Mapping | None) -> bool:
    return isinstance(circuit, Mapping) and circuit.get("model_kind") == "stress"


def _class_masks(graph: Graph, circuit: Mapping) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Edges outside the circuit, and each ground-truth class's edges, over ``graph.edges``."""
    classes = circuit.get("edge_classes") or {}
    truth = set(circuit.get("edges") or [])
    names = list(graph.edge_names)
    outside = np.array([n not in truth for n in names])
    return outside, {cls: np.array([classes.get(n) == cls for n in names]) for cls in sorted(set(classes.values()))}


def class_aurocs(graph: Graph, doc: Mapping, circuit: Mapping, floor: bool = True) -> dict[str, float]:
    """Edge AUROC of one method's scores for each ground-truth class: that class's edges as
    positives against every edge outside the circuit (other classes and marked edges left out).
    Scores below the document's numerical resolution tie with 0 unless ``floor=False``
    (:mod:`cbench.scoring.resolution`)."""
    scores, _flags = _edge_vector(graph, doc)
    signed = signed_ranking(doc)
    if floor:
        scores = floor_scores(scores, doc, signed=signed)[0]
    return class_aurocs_of(scores if signed else np.abs(scores), graph, circuit)


def class_aurocs_of(values, graph: Graph, circuit: Mapping) -> dict[str, float]:
    """:func:`class_aurocs` of a vector already as ranked (|score|, or signed, over ``graph.edges``)."""
    vals = np.asarray(values, dtype=np.float64)
    outside, classes = _class_masks(graph, circuit)
    out = {}
    for cls, pos in classes.items():
        keep = pos | outside
        if pos.any() and outside.any():
            out[cls] = float(auroc(vals[keep], pos[keep]))
    return out


def class_sub_resolution(graph: Graph, doc: Mapping, circuit: Mapping) -> dict[str, int]:
    """Per ground-truth class: how many of its edges have a non-zero score below the document's
    resolution (edges that rank above the exact zeros only by rounding residue)."""
    raw, _flags = _edge_vector(graph, doc)
    ranked = floor_scores(raw, doc, signed=signed_ranking(doc))[0]
    lifted = (raw != 0) & (ranked == 0)
    _outside, classes = _class_masks(graph, circuit)
    return {cls: int((lifted & pos).sum()) for cls, pos in classes.items()}


def verdict(value: float | None) -> str | None:
    """``fail``, ``pass`` or ``partial`` for an edge AUROC (None for none)."""
    if value is None or value != value:
        return None
    return "fail" if value <= FAIL_AT_MOST else "pass" if value >= PASS_AT_LEAST else "partial"


def predictions_held(predictions: Mapping[str, Mapping], aurocs: Mapping[str, float]) -> list[dict]:
    """One row per prediction of a model card whose method was run: expected, measured, held."""
    rows = []
    for method, pred in sorted(predictions.items()):
        value = aurocs.get(method)
        got = verdict(value)
        if got is None:
            continue
        rows.append({"method": method, "expected": pred.get("expect"), "measured": got, "auroc": value,
                     "held": got == pred.get("expect"), "why": pred.get("why", "")})
    return rows


def mechanism_table(auroc: Mapping[str, Mapping[str, float]], mechanisms: Mapping[str, str],
                    methods: list[str]) -> dict[str, dict[str, float]]:
    """Mean edge AUROC per mechanism and method over the stress models that plant it."""
    out: dict[str, dict[str, float]] = {}
    for mech in sorted(set(mechanisms.values())):
        cases = [c for c, m in mechanisms.items() if m == mech and c in auroc]
        out[mech] = {m: float(np.mean([auroc[c][m] for c in cases if auroc[c].get(m) is not None]))
                     for m in methods if any(auroc[c].get(m) is not None for c in cases)}
    return out


def robustness_table(auroc: Mapping[str, Mapping[str, float]], mechanisms: Mapping[str, str],
                     methods: list[str]) -> dict[str, dict[str, dict]]:
    """Per mechanism and method, over the designs that plant the mechanism: the mean, the lowest and
    highest edge AUROC, their spread, each design's verdict (:func:`verdict`), and whether the
    verdict is **robust** (the same on every design, at least two of them) or **design-dependent**."""
    out: dict[str, dict[str, dict]] = {}
    for mech in sorted(set(mechanisms.values())):
        cases = sorted(c for c, m in mechanisms.items() if m == mech and c in auroc)
        row = {}
        for m in methods:
            vals = {c: auroc[c][m] for c in cases if auroc[c].get(m) is not None}
            if not vals:
                continue
            v = np.array(list(vals.values()), dtype=float)
            verdicts = {c: verdict(x) for c, x in vals.items()}
            same = len(set(verdicts.values())) == 1
            row[m] = {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
                      "spread": float(v.max() - v.min()), "n": len(vals), "verdicts": verdicts,
                      "verdict": next(iter(verdicts.values())) if same else None,
                      "robust": bool(same and len(vals) >= 2)}
        out[mech] = row
    return out


def robustness_markdown(table: Mapping[str, Mapping[str, Mapping]], methods: list[str]) -> str:
    """The method x mechanism table: mean (spread over designs) and R (robust: the same verdict, pass
    / fail / partial, on every design) or D (design-dependent)."""
    cols = [m for m in methods if any(m in row for row in table.values())]
    lines = ["| mechanism (designs) | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
    for mech, row in table.items():
        n = max((c["n"] for c in row.values()), default=0)
        cells = []
        for m in cols:
            c = row.get(m)
            if c is None:
                cells.append("")
                continue
            mark = f"R {c['verdict']}" if c["robust"] else ("D" if c["n"] >= 2 else "1 design")
            cells.append(f"{c['mean']:.2f} ({c['spread']:.2f}) {mark}")
        lines.append(f"| {mech} ({n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def defeats(auroc: Mapping[str, Mapping[str, float]], cpr: Mapping[str, Mapping[str, float | None]],
            mechanisms: Mapping[str, str], methods: list[str]) -> dict[str, dict[str, list[str]]]:
    """Per mechanism, over its models' means: the methods it defeats (edge AUROC at most
    ``FAIL_AT_MOST``, or CPR below the random method's) and those it does not (AUROC at least
    ``PASS_AT_LEAST``). The random method itself is in neither list."""
    by_auroc = mechanism_table(auroc, mechanisms, methods)
    by_cpr = mechanism_table(cpr, mechanisms, methods) if cpr else {}
    out = {}
    for mech, row in by_auroc.items():
        cprs = by_cpr.get(mech, {})
        floor = cprs.get("random")
        real = [m for m in methods if m != "random" and m in row]
        out[mech] = {
            "defeated": [m for m in real if row[m] <= FAIL_AT_MOST
                         or (floor is not None and cprs.get(m) is not None and cprs[m] < floor)],
            "not_defeated": [m for m in real if row[m] >= PASS_AT_LEAST],
        }
    return out


def _table(title: str, table: Mapping[str, Mapping[str, float]], methods: list[str]) -> list[str]:
    cols = [m for m in methods if any(m in row for row in table.values())]
    lines = [title, "", "| mechanism | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
    for mech, row in table.items():
        lines.append(f"| {mech} | " + " | ".join(f"{row[m]:.3f}" if row.get(m) is not None else "" for m in cols)
                     + " |")
    return lines


def markdown(table: Mapping[str, Mapping[str, float]], methods: list[str], held: Mapping[str, list[dict]],
             faithfulness: Mapping[str, Mapping] | None = None, beaten: Mapping[str, Mapping] | None = None) -> str:
    """The method x mechanism tables (edge AUROC; CPR and CMD when given), which methods each
    mechanism defeats, and the predictions that did not hold, as Markdown."""
    lines = _table("## Stress tier: mean edge AUROC per mechanism", table, methods)
    for metric, better in (("cpr", "higher is better"), ("cmd", "lower is better")):
        if faithfulness and faithfulness.get(metric):
            lines += [""] + _table(f"### Mean {metric.upper()} per mechanism ({better})", faithfulness[metric],
                                   methods)
    if beaten:
        lines += ["", "| mechanism | defeats (AUROC <= 0.75 or CPR below random's) | does not defeat (AUROC >= 0.90) |",
                  "| --- | --- | --- |"]
        lines += [f"| {mech} | {', '.join(row['defeated']) or '(none)'} | {', '.join(row['not_defeated']) or '(none)'} |"
                  for mech, row in beaten.items()]
    rows = [dict(r, case=c) for c, rs in held.items() for r in rs]
    n_held = sum(r["held"] for r in rows)
    lines += ["", f"Predictions in the model cards: {n_held} of {len(rows)} held"
              + (f" ({100 * n_held / len(rows):.0f} %)." if rows else "."), ""]
    missed = [r for r in rows if not r["held"]]
    if missed:
        lines += ["| model | method | expected | measured (AUROC) |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['case']} | {r['method']} | {r['expected']} | {r['measured']} ({r['auroc']:.3f}) |"
                  for r in missed]
    return "\n".join(lines) + "\n"
