"""The report's figures, each from the numbers its page's table shows.

* ROC panels of a case (inline SVG): each entry's curve, titled with its table cell; the random
  row's curve is the vertical mean of the curves of the draws whose mean AUROC is that cell
  (:func:`cbench.scoring.bench.random_mean_roc`), not one draw's curve;
* circuit drawings (``img/circuit_<case>.svg`` and ``img/circuit_<case>_<entry>.svg``);
* the leaderboard's box plot (inline SVG) and the data its difference plot is drawn from in the
  page (``report.js``: the plot follows the comparison selector and the filter).
"""

from __future__ import annotations

from pathlib import Path

from cbench.report.entries import (
    CaseInfo,
    Entry,
    _case_key,
    _no_signal,
    fmt,
    score_doc,
    slug,
)
from cbench.report.svg import boxplot, color, roc_panel


def case_figures(case: str, info: CaseInfo, entries: list[Entry], bench: dict) -> list[tuple[Entry, str]]:
    """One ROC panel per entry scored on ``case``: (entry, SVG markup)."""
    from cbench.scoring.random_baseline import random_mean_roc
    from cbench.scoring.statistics import roc_staircase

    marks = _no_signal(bench, case)
    out = []
    for i, e in enumerate(entries):
        value = e.auroc.get(case)
        if case not in e.scores or value is None:
            continue
        kept = (bench["results"].get("random_roc") or {}).get(case)
        if e.kind == "random" and kept:  # the bench's random row: the mean curve of its draws, as the bench kept it
            fpr, tpr = roc_staircase(kept)
        elif e.kind == "random":  # results of an older bench: draw them again
            seed = int(e.scores[case]["method"]["hyperparameters"].get("seed", 0))
            fpr, tpr = random_mean_roc(info.artifact.graph, info.truth, seed, no_signal=marks or ())
        else:
            r = score_doc(info, e.scores[case], marks)
            fpr, tpr = r.edge_roc.fpr, r.edge_roc.tpr
        out.append((e, roc_panel(fpr, tpr, e.name, fmt(value), color(i))))
    return out


def circuits(out: Path, case: str, info: CaseInfo, entries: list[Entry], bench: dict, write) -> None:
    """img/circuit_<case>.svg (the ground truth) and img/circuit_<case>_<entry>.svg (its top edges)."""
    from cbench.report.circuit_plot import draw_circuit, top_edges
    from cbench.scoring.ground_truth import signed_ranking

    graph = info.artifact.graph
    write(out / "img" / f"circuit_{slug(case)}.svg", draw_circuit(graph, info.truth, None,
                                                                  f"{info.model}: ground-truth circuit"))
    k = len({e.split("<")[0] for e in info.truth})
    for e in entries:
        if case in e.scores:
            top = top_edges(graph, e.scores[case], k, signed=signed_ranking(e.scores[case]))
            write(out / "img" / f"circuit_{slug(case)}_{e.slug}.svg",
                  draw_circuit(graph, info.truth, top, f"{info.model}: top {k} edges of {e.name}"))


def leaderboard_data(entries: list[Entry], cases: list[str], ranked: list[Entry]) -> dict:
    """The difference plot's data (every entry's AUROC per case, as the table shows it) and the
    box plot (ranked entries first, then the others)."""
    order = ranked + [e for e in entries if e not in ranked]
    colours = {e.name: color(i) for i, e in enumerate(entries)}
    table = {"cases": sorted(cases, key=_case_key),
             "entries": [{"name": e.name, "kind": e.kind, "colour": colours[e.name],
                          "auroc": {c: (None if e.auroc.get(c) is None else float(fmt(e.auroc[c], 6)))
                                    for c in cases}} for e in entries]}
    values = {e.name: [e.auroc[c] for c in cases if e.auroc.get(c) is not None] for e in order}
    return {"table": table, "boxplot": boxplot(values, colours)}
