"""Draw the README's figure, docs/img/circuit-vs-eap.png: a stress-tier model's ground-truth
circuit beside the top edges EAP finds on it.

    .venv/bin/python docs/make_figure.py [--model stress-backup-1] [--method eap] [--out PATH]

The model is pulled from the hub like any case (the embedded hub by default), the method runs on
100 validation pairs, and both panels are drawn with the HTML report's own circuit drawing
(:mod:`cbench.report.circuit_plot`). Deterministic: the same model, method and data give the same
PNG bytes.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def render(model: str, method: str, n_pairs: int) -> bytes:
    """The PNG bytes of the two panels side by side."""
    from cbench.discovery import discover, to_edge_scores_document
    from cbench.report.circuit_plot import draw_circuit, top_edges
    from cbench.scoring.task import pair_data, resolve_case
    from PIL import Image

    case = resolve_case(model)
    truth = case.truth_edges()
    result = discover(case.runtime, pair_data(case, n=n_pairs), method, progress=False)
    doc = to_edge_scores_document(result, case.case)
    k = len({e.split("<")[0] for e in truth})  # as the report does: q/k/v edges promoted to heads
    top = top_edges(case.graph, doc, k)
    left = Image.open(io.BytesIO(draw_circuit(case.graph, truth, None, f"{model}: ground-truth circuit")))
    right = Image.open(io.BytesIO(draw_circuit(case.graph, truth, top, f"{model}: top {k} edges of {method}")))
    out = Image.new("RGB", (left.width + right.width, max(left.height, right.height)), "white")
    out.paste(left.convert("RGB"), (0, 0))
    out.paste(right.convert("RGB"), (left.width, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="stress-backup-1")
    ap.add_argument("--method", default="eap")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=HERE / "img" / "circuit-vs-eap.png")
    args = ap.parse_args(argv)
    png = render(args.model, args.method, args.pairs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
