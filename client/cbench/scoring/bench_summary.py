"""The summary of a bench run: per-method means and calibration against the oracle and random
rows, the Markdown table (edge and node AUROC, MIB's published rows beside them) and the ROC and
AUROC figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cbench.scoring.resolution import RESOLUTION_FACTOR

RESOLUTION_RULE = f"{RESOLUTION_FACTOR} x eps(dtype) x max |score|"

ORACLE = "activation-patching"  # exact patching of every edge alone: the calibration's top (in the bench by default)
# the random column is the mean edge AUROC over this many draws: with 200 (InterpBench's count) a
# 2-of-8 ground truth leaves a standard error of 0.017, too much for a row that must read 0.5 +- 0.02
RANDOM_SEEDS = 10_000
# MIB's published edge AUROC on its InterpBench IOI model (MIB Table 2, counterfactual ablation;
# EAP (CF) for eap, EActP for activation patching), printed beside cbench's IOI row
PUBLISHED = {"ioi": ("MIB Table 2 (InterpBench, published)",
                     {"random": 0.44, "activation-patching": 0.28, "eap": 0.73, "eap-ig-inputs": 0.71,
                      "eap-ig-activations": 0.81, "nap": 0.30, "nap-ig": 0.62, "ifr": 0.71, "ugs": 0.74})}


def _case_key(case: str):
    return (0, int(case), "") if str(case).isdigit() else (1, 0, str(case))


def _method_stats(auroc: dict, methods: list[str]) -> dict:
    from cbench.scoring.statistics import mann_whitney

    per_method = {m: [auroc[c][m] for c in auroc if auroc[c].get(m) is not None] for m in methods}
    summary = {m: ({"n": len(v), "mean": float(np.mean(v)), "std": float(np.std(v)), "median": float(np.median(v))}
                   if v else {"n": 0}) for m, v in per_method.items()}
    p: dict = {}
    a12: dict = {}
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            if per_method[a] and per_method[b]:
                r = mann_whitney(per_method[a], per_method[b])
                p.setdefault(a, {})[b] = r.p_value
                a12.setdefault(a, {})[b] = r.a12
    return {"summary": summary, "p": p, "a12": a12}


def _calibration(auroc: dict, methods: list[str]) -> dict:
    """The oracle and random rows: mean, min and max over cases of their edge AUROC."""
    out = {}
    for m, target in ((ORACLE, "1.0 on Tracr ground truths (without no-signal edges); >= 0.99 on SIIT v2"),
                      ("random", "0.5 +- 0.02 per case")):
        if m in methods:
            v = [auroc[c][m] for c in auroc if auroc[c].get(m) is not None]
            out[m] = ({"n": len(v), "mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v)),
                       "target": target} if v else {"n": 0, "target": target})
    return out


def _markdown(auroc, node_auroc, methods, stats, wall, kinds=None, timings=None, promoted=None, signal=None) -> str:
    kinds, timings, promoted, signal = kinds or {}, timings or {}, promoted or {}, signal or {}

    def f(x, d=3):
        return "–" if x is None else f"{x:.{d}f}"

    def fp(x):  # p-values: small ones in scientific notation, not as 0.0000
        return "–" if x is None else (f"{x:.4f}" if x >= 1e-3 else f"{x:.1e}")

    def model(c):
        kind = kinds.get(c)
        if kind is not None and c in PUBLISHED:  # a named model (cbench/ioi), not case-<id>
            return c
        return "" if kind is None else (f"case-{c}" if kind == "siit" else f"{kind}-case-{c}")

    head = "| case | model | " + " | ".join(methods) + " |"
    rule = "|---|---|" + "---|" * len(methods)
    lines = ["# cbench bench", "", "Edge AUROC against the ground truth at q/k/v granularity (every q/k/v edge "
             "ranked by |score|, signed for mask-logit methods such as sp and edge-sp), with ground-truth edges "
             f"that cannot carry signal left out. `{ORACLE}` is the oracle (each edge's exact effect, measured "
             f"alone); `random` is the mean over {RANDOM_SEEDS} seeds. Model: the SIIT model "
             "`case-<id>` where released, else the compiled Tracr model `tracr-case-<id>`.", "", head, rule]
    for c in auroc:
        lines.append(f"| {c} | {model(c)} | " + " | ".join(f(auroc[c].get(m)) for m in methods) + " |")
        if c in PUBLISHED:  # a published row for the same task, beside cbench's (not in the mean)
            label, row = PUBLISHED[c]
            lines.append(f"| {c} | {label} | " + " | ".join(f(row.get(m), 2) for m in methods) + " |")
    s = stats["summary"]
    lines.append("| **mean** | | " + " | ".join(f(s[m].get("mean")) for m in methods) + " |")
    lines.append("| **std** | | " + " | ".join(f(s[m].get("std")) for m in methods) + " |")
    calib = _calibration(auroc, methods)
    if calib:
        lines += ["", "Calibration (edge AUROC over the cases):", "", "| row | mean | min | max | target |",
                  "|---|---|---|---|---|"]
        for m, label in ((ORACLE, f"oracle ({ORACLE})"), ("random", f"random ({RANDOM_SEEDS} seeds)")):
            if m in calib:
                r = calib[m]
                lines.append(f"| {label} | {f(r.get('mean'))} | {f(r.get('min'))} | {f(r.get('max'))} | {r['target']} |")
    if promoted:
        lines += ["", "Edge AUROC promoted to heads (InterpBench-compatible: a head edge's score is the max |score| "
                  "over its q/k/v edges):", "", head, rule]
        lines += _rows(promoted, methods, model, f)
    marked = {c: v for c, v in signal.items() if v.get("edges")}
    if marked:
        lines += ["", "Ground-truth edges left out as carrying no signal:", ""]
        for c, v in marked.items():
            lines.append(f"* {c} ({v['from']}): " + ", ".join(sorted(v["edges"])))
    lines += ["", "Node AUROC (– where every node is in the circuit):", "", head, rule]
    for c in node_auroc:
        lines.append(f"| {c} | {model(c)} | " + " | ".join(f(node_auroc[c].get(m)) for m in methods) + " |")
    for title, key, fmt in (("Wilcoxon-Mann-Whitney U p-values (two-sided)", "p", fp),
                            ("Vargha-Delaney A12 (row method better than column when > 0.5)", "a12", f)):
        lines += ["", f"{title}:", "", "| | " + " | ".join(methods[1:]) + " |", "|---|" + "---|" * (len(methods) - 1)]
        for i, a in enumerate(methods[:-1]):
            row = [("" if j <= i else fmt(stats[key].get(a, {}).get(b))) for j, b in enumerate(methods[1:], start=1)]
            lines.append(f"| {a} | " + " | ".join(row) + " |")
    if timings:
        def t(x):
            return "–" if x is None else f"{x:.2f}"

        lines += ["", "Method runtime per case (s; the discovery itself, after data and ablations are prepared; "
                  "kept from the run that made the scores file):", "", head, rule]
        lines += _rows(timings, methods, model, t, total=True)
    lines += ["", f"Wall time of this run (after loading the package; a resumed run counts only its own work, "
              f"plots included): {wall:.1f} s.", ""]
    return "\n".join(lines)


def _rows(values: dict, methods: list[str], model, fmt, total: bool = False) -> list[str]:
    """Markdown rows of a per-case x method table, then its mean (and total) over the cases."""
    lines = [f"| {c} | {model(c)} | " + " | ".join(fmt(values[c].get(m)) for m in methods) + " |" for c in values]
    per = {m: [values[c][m] for c in values if values[c].get(m) is not None] for m in methods}
    lines.append("| **mean** | | " + " | ".join(fmt(float(np.mean(v))) if v else "–" for v in per.values()) + " |")
    if total:
        lines.append("| **total** | | " + " | ".join(fmt(float(np.sum(v))) if v else "–" for v in per.values()) + " |")
    return lines


def _plots(out: Path, auroc, rocs, methods) -> list[str]:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cbench.scoring.report import write_bytes_atomic

    written = []
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}

    def save(fig, name, tight: bool = True):
        buf = io.BytesIO()
        if tight:
            fig.tight_layout()
        fig.savefig(buf, format="png")
        plt.close(fig)
        write_bytes_atomic(out / name, buf.getvalue())
        written.append(name)

    data = [[auroc[c][m] for c in auroc if auroc[c].get(m) is not None] for m in methods]
    if any(data):
        fig, ax = plt.subplots(figsize=(1.2 * len(methods) + 2, 4.2), dpi=110)
        ax.boxplot([d if d else [np.nan] for d in data], showfliers=False, widths=0.55)
        for i, (m, d) in enumerate(zip(methods, data), start=1):
            jitter = np.random.default_rng(i).uniform(-0.14, 0.14, len(d))
            ax.scatter(np.full(len(d), i) + jitter, d, s=12, alpha=0.7, color=colors[m], zorder=3)
            if d:
                ax.scatter([i], [np.mean(d)], marker="D", s=28, facecolor="white", edgecolor="k", zorder=4)
        ax.set_xticks(range(1, len(methods) + 1), [f"{m}\n(n={len(d)})" for m, d in zip(methods, data)])
        ax.set_xlabel("method")
        ax.set_ylabel("edge AUROC")
        ax.set_ylim(-0.02, 1.02)
        ax.axhline(0.5, c="grey", ls=":", lw=0.8)
        ax.set_title(f"edge AUROC per method over {len(auroc)} cases (box: quartiles and median; "
                     "dots: cases; diamond: mean; dotted: chance)", fontsize=9)
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
        save(fig, "auroc_boxplot.png")
    if "acdc" in methods and auroc:
        others = [m for m in methods if m != "acdc"]
        cases = [c for c in auroc if auroc[c].get("acdc") is not None]
        if others and cases:
            fig, ax = plt.subplots(figsize=(max(5, 0.55 * len(cases) + 3), 4.2), dpi=110)
            width = 0.8 / len(others)
            x = np.arange(len(cases))
            for i, m in enumerate(others):
                diffs = np.array([(auroc[c].get(m) - auroc[c]["acdc"]) if auroc[c].get(m) is not None else np.nan
                                  for c in cases])
                xs = x + i * width - 0.4 + width / 2
                ax.bar(xs, diffs, width, label=m, color=colors[m])
                ax.scatter(xs, diffs, s=6, color=colors[m], zorder=3)  # a zero difference stays visible
            ax.axhline(0, c="k", lw=0.8)
            for b in x[:-1]:
                ax.axvline(b + 0.5, c="grey", lw=0.4, alpha=0.5)
            ax.set_xticks(x, cases)
            ax.set_xlim(-0.6, len(cases) - 0.4)
            ax.set_xlabel("case")
            ax.set_ylabel("edge AUROC − ACDC's edge AUROC")
            ax.set_title("per-case difference to ACDC (dots on the line: same AUROC as ACDC)", fontsize=9)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            save(fig, "diff_to_acdc.png")
    for c, curves in rocs.items():
        # one small panel per method: curves of different methods often coincide (several at AUROC
        # 1), so overlaid they would hide each other
        n = len(curves)
        ncol = min(4, n)
        nrow = -(-n // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(2.3 * ncol + 0.3, 2.35 * nrow + 0.5), dpi=110,
                                 sharex=True, sharey=True, squeeze=False)
        for ax, (m, (fpr, tpr, area)) in zip(axes.flat, curves.items()):
            ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.7)
            ax.plot(fpr, tpr, lw=1.8, color=colors.get(m), drawstyle="default")
            ax.fill_between(fpr, tpr, color=colors.get(m), alpha=0.12)
            ax.set_title(f"{m}: AUROC {area:.3f}", fontsize=8.5)
            ax.set_xlim(-0.02, 1.02)
            ax.set_ylim(-0.02, 1.02)
            ax.set_aspect("equal")
            ax.tick_params(labelsize=7)
        for i, ax in enumerate(axes.flat):
            if i >= n:
                ax.set_visible(False)
            elif i + ncol >= n:  # the lowest panel of its column
                ax.xaxis.set_tick_params(labelbottom=True)
                ax.set_xlabel("false positive rate", fontsize=8)
        for ax in axes[:, 0]:
            ax.set_ylabel("true positive rate", fontsize=8)
        fig.suptitle(f"case {c}: edge ROC per method (dashed: chance)", fontsize=10)
        # a fixed layout: matplotlib's tight layout of a grid of 13-16 panels took ~1.2 s a figure
        w, h = fig.get_size_inches()
        fig.subplots_adjust(left=0.75 / w, right=1 - 0.15 / w, bottom=0.55 / h, top=1 - 0.55 / h,
                            wspace=0.18, hspace=0.38)
        save(fig, f"roc_{c}.png", tight=False)
    return written


def resolution_markdown(auroc: dict, auroc_raw: dict, sub: dict, methods: list[str]) -> str:
    """Per method: mean edge AUROC with sub-resolution scores tied with 0 (the bench's figure) and
    with the raw scores, and how many ground-truth edges only sub-resolution scores had lifted."""
    lines = ["## Numerical resolution", "",
             f"Scores below {RESOLUTION_RULE} tie with 0 (docs/scoring.md). Per method over the cases: "
             "mean edge AUROC as scored, the same with the raw scores ranked, and the ground-truth edges "
             "whose non-zero score was below the resolution (ranked above the exact zeros only by rounding "
             "residue before this rule).", "",
             "| method | mean AUROC | mean AUROC, raw scores | ground-truth edges below resolution (cases) |",
             "| --- | ---: | ---: | ---: |"]
    for m in methods:
        vals = [auroc[c][m] for c in auroc if auroc[c].get(m) is not None]
        raws = [auroc_raw[c][m] for c in auroc_raw if auroc_raw[c].get(m) is not None]
        if not vals:
            continue
        n = sum(sub.get(c, {}).get(m, 0) for c in sub)
        cases = sum(1 for c in sub if sub[c].get(m, 0))
        lines.append(f"| {m} | {np.mean(vals):.3f} | {np.mean(raws):.3f} | {n} ({cases}) |")
    return "\n".join(lines) + "\n"
