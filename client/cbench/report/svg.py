"""The report's figures as SVG written directly (no plotting library): ROC panels and the box plot.

Every text in a figure comes from the same numbers as the tables beside it (the caller passes
them), and every name is escaped, so a figure can be put inline in a page. Each figure carries
its numbers as ``data-*`` attributes too, so a browser test can compare figure and table.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def attr(value) -> str:
    """A value as an escaped, double-quoted attribute."""
    return '"' + escape(str(value), quote=True) + '"'


def roc_panel(fpr: Sequence[float], tpr: Sequence[float], name: str, auroc_text: str, colour: str,
              size: int = 170, max_points: int = 400) -> str:
    """One method's ROC curve with its AUROC in the title (``auroc_text``: as the table prints it)."""
    pad, top = 26, 20
    w = size - pad - 6
    fpr, tpr = np.asarray(fpr, dtype=float), np.asarray(tpr, dtype=float)
    if fpr.size > max_points:  # a long staircase: keep its corners evenly (the shape, not every step)
        idx = np.unique(np.linspace(0, fpr.size - 1, max_points).round().astype(int))
        fpr, tpr = fpr[idx], tpr[idx]
    pts = " ".join(f"{pad + x * w:.1f},{top + (1 - y) * w:.1f}" for x, y in zip(fpr, tpr))
    area = f"{pad:.1f},{top + w:.1f} " + pts + f" {pad + w:.1f},{top + w:.1f}"
    title = f"{name}: AUROC {auroc_text}"
    return (f'<svg class="roc" xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size + 14}" '
            f'viewBox="0 0 {size} {size + 14}" data-name={attr(name)} data-auroc={attr(auroc_text)} role="img">'
            f'<title>{escape(title)}</title>'
            f'<text class="roc-title" x="{size / 2:.0f}" y="13" text-anchor="middle" font-size="10.5">{escape(title)}</text>'
            f'<rect x="{pad}" y="{top}" width="{w}" height="{w}" fill="none" stroke="#bbb"/>'
            f'<line x1="{pad}" y1="{top + w}" x2="{pad + w}" y2="{top}" stroke="#999" stroke-dasharray="3 3"/>'
            f'<polygon points="{area}" fill={attr(colour)} fill-opacity="0.12" stroke="none"/>'
            f'<polyline points="{pts}" fill="none" stroke={attr(colour)} stroke-width="1.8"/>'
            f'<text x="{pad + w / 2:.0f}" y="{top + w + 12}" text-anchor="middle" font-size="8.5">false positive rate</text>'
            f'<text x="9" y="{top + w / 2:.0f}" text-anchor="middle" font-size="8.5" '
            f'transform="rotate(-90 9 {top + w / 2:.0f})">true positive rate</text>'
            f'<text x="{pad - 3}" y="{top + w + 3}" text-anchor="end" font-size="7.5">0</text>'
            f'<text x="{pad - 3}" y="{top + 6}" text-anchor="end" font-size="7.5">1</text>'
            f'<text x="{pad + w}" y="{top + w + 12}" text-anchor="end" font-size="7.5">1</text>'
            "</svg>")


def boxplot(values: dict[str, list[float]], colours: dict[str, str], width_per: int = 62, height: int = 250,
            label: str = "edge AUROC") -> str:
    """Per entry (in the given order): the box of quartiles, the median, the mean (diamond) and
    one dot per case, on a 0-1 axis with chance (0.5) dotted."""
    names = list(values)
    left, top, bottom = 44, 12, 70
    h = height - top - bottom
    width = left + width_per * max(1, len(names)) + 10

    def y(v: float) -> float:
        return top + (1 - v) * h

    parts = [(f'<svg id="auroc-boxplot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
              f'viewBox="0 0 {width} {height}" role="img"><title>{escape(label)} per entry over the cases</title>')]
    for t in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eee"/>'
                     f'<text x="{left - 4}" y="{y(t) + 3:.1f}" text-anchor="end" font-size="9">{t:g}</text>')
    parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y(0.5):.1f}" y2="{y(0.5):.1f}" stroke="#888" '
                 'stroke-dasharray="2 3"/>')
    parts.append(f'<text x="11" y="{top + h / 2:.0f}" font-size="10" text-anchor="middle" '
                 f'transform="rotate(-90 11 {top + h / 2:.0f})">{escape(label)}</text>')
    for i, name in enumerate(names):
        v = np.asarray([x for x in values[name] if x is not None], dtype=float)
        cx = left + width_per * (i + 0.5)
        c = colours.get(name, color(i))
        mean_attr = f"{float(v.mean()):.6f}" if v.size else ""
        parts.append(f'<g class="box" data-name={attr(name)} data-mean={attr(mean_attr)} data-n="{v.size}">')
        if v.size:
            q1, med, q3 = np.percentile(v, [25, 50, 75])
            bw = width_per * 0.5
            parts.append(f'<rect x="{cx - bw / 2:.1f}" y="{y(q3):.1f}" width="{bw:.1f}" height="{max(0.8, y(q1) - y(q3)):.1f}" '
                         f'fill="none" stroke="#333"/>'
                         f'<line x1="{cx - bw / 2:.1f}" x2="{cx + bw / 2:.1f}" y1="{y(med):.1f}" y2="{y(med):.1f}" '
                         f'stroke="#e66101" stroke-width="1.6"/>'
                         f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(v.max()):.1f}" y2="{y(q3):.1f}" stroke="#333"/>'
                         f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(q1):.1f}" y2="{y(v.min()):.1f}" stroke="#333"/>')
            jitter = np.random.default_rng(i + 1).uniform(-0.16, 0.16, v.size) * width_per
            for dx, val in zip(jitter, v):
                parts.append(f'<circle cx="{cx + dx:.1f}" cy="{y(val):.1f}" r="2.6" fill={attr(c)} fill-opacity="0.75"/>')
            m = float(v.mean())
            parts.append(f'<path d="M{cx:.1f},{y(m) - 5:.1f} l5,5 l-5,5 l-5,-5 z" fill="#fff" stroke="#000"/>')
        parts.append(f'<text x="{cx:.1f}" y="{top + h + 12}" font-size="9" text-anchor="end" '
                     f'transform="rotate(-35 {cx:.1f} {top + h + 12})">{escape(name)} (n={v.size})</text></g>')
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["PALETTE", "attr", "boxplot", "color", "roc_panel"]
