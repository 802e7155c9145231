"""Draw the README's figure, docs/img/circuit-vs-eap.svg: a stress-tier model's ground-truth
circuit beside the top edges EAP finds on it.

    .venv/bin/python docs/make_figure.py [--model stress-backup-1] [--method eap] [--out PATH]

The model is pulled from the hub like any case (the embedded hub by default), the method runs on
100 validation pairs, and both panels are drawn with the HTML report's own circuit drawing
(:mod:`cbench.report.circuit_plot`), side by side on a white ground. Deterministic: the same
model, method and data give the same bytes. (The drawing is SVG; were it PNG, so is the figure.)
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def render(model: str, method: str, n_pairs: int) -> bytes:
    """The figure's bytes: the two panels side by side (SVG, or PNG if the drawing is PNG)."""
    from cbench.discovery import discover, to_edge_scores_document
    from cbench.report.circuit_plot import draw_circuit, top_edges
    from cbench.scoring.task import pair_data, resolve_case

    case = resolve_case(model)
    truth = case.truth_edges()
    result = discover(case.runtime, pair_data(case, n=n_pairs), method, progress=False)
    doc = to_edge_scores_document(result, case.case)
    k = len({e.split("<")[0] for e in truth})  # as the report does: q/k/v edges promoted to heads
    top = top_edges(case.graph, doc, k)
    left = draw_circuit(case.graph, truth, None, f"{model}: ground-truth circuit")
    right = draw_circuit(case.graph, truth, top, f"{model}: top {k} edges of {method}")
    return _side_by_side_png(left, right) if left.startswith(PNG_MAGIC) else _side_by_side_svg(left, right)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _svg_size(svg: str) -> tuple[int, int]:
    root = re.search(r"<svg\b[^>]*>", svg).group(0)
    return (int(float(re.search(r'\bwidth="([\d.]+)"', root).group(1))),
            int(float(re.search(r'\bheight="([\d.]+)"', root).group(1))))


def _side_by_side_svg(left: bytes, right: bytes) -> bytes:
    panels, x, height = [], 0, 0
    for svg in (left.decode(), right.decode()):
        svg = re.sub(r"^<\?xml[^>]*\?>\s*", "", svg.strip())
        w, h = _svg_size(svg)
        panels.append(svg.replace("<svg ", f'<svg x="{x}" y="0" ', 1))
        x, height = x + w, max(height, h)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{x}" height="{height}" viewBox="0 0 {x} {height}" '
            f'font-family="DejaVu Sans, Arial, sans-serif"><rect width="{x}" height="{height}" fill="white"/>'
            + "".join(panels) + "</svg>\n").encode()


def _side_by_side_png(left: bytes, right: bytes) -> bytes:
    from PIL import Image

    a, b = Image.open(io.BytesIO(left)).convert("RGB"), Image.open(io.BytesIO(right)).convert("RGB")
    out = Image.new("RGB", (a.width + b.width, max(a.height, b.height)), "white")
    out.paste(a, (0, 0))
    out.paste(b, (a.width, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="stress-backup-1")
    ap.add_argument("--method", default="eap")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--out", type=Path, help="default: docs/img/circuit-vs-eap.svg (.png for a PNG drawing)")
    args = ap.parse_args(argv)
    data = render(args.model, args.method, args.pairs)
    out = args.out or HERE / "img" / ("circuit-vs-eap.png" if data.startswith(PNG_MAGIC) else "circuit-vs-eap.svg")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
