"""Predictions for held-out stress designs from the tier's robust verdicts alone (round 2 of
docs/stress-held-out-predictions.md): merge the results.json of a bench of the whole tier, build the
method x mechanism robustness table over every hand-set design of each mechanism (the trained
counterparts ``*-siit-*`` and the held-out designs themselves left out), and predict, for each
held-out design and method, the cell's verdict where that cell is **robust** (the same verdict on
every design, at least two); design-dependent cells give no prediction. ``random`` is left out (at
chance by construction).

Usage: ``python benchmarks/stress_predict.py RESULTS_JSON [...] --held-out A,B,...``: the markdown
table of predictions and the JSON block to commit (before any method runs on the held-out designs).
``--table MARKDOWN`` reads the robust cells from a robustness table already published (the
"Method x mechanism over designs" table of docs/stress-tier.md: ``R pass``, ``R fail``, ``R partial``)
instead of results files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stress_robustness import mechanism_of

from cbench.scoring.stress_tier import robustness_table


def predictions(auroc: dict, mechanisms: dict[str, str], held_out: dict[str, str]) -> dict[str, dict[str, str]]:
    """``{design: {method: verdict}}`` from the robust cells of ``auroc``'s table (``held_out``:
    design -> mechanism)."""
    methods = [m for m in dict.fromkeys(m for row in auroc.values() for m in row) if m != "random"]
    table = robustness_table(auroc, mechanisms, methods)
    out = {}
    for design, mech in sorted(held_out.items()):
        row = table.get(mech, {})
        out[design] = {m: row[m]["verdict"] for m in sorted(row) if row[m]["robust"]}
    return out


def table_cells(markdown: str) -> dict[str, dict[str, str]]:
    """``{mechanism: {method: verdict}}`` of the robust cells of a published robustness table."""
    lines = [line for line in markdown.splitlines() if line.startswith("| mechanism (designs) |")]
    if not lines:
        raise SystemExit("no robustness table (a row starting '| mechanism (designs) |') in the file")
    rows = markdown.splitlines()
    at = rows.index(lines[-1])
    methods = [c.strip() for c in rows[at].strip("|").split("|")][1:]
    out: dict[str, dict[str, str]] = {}
    for line in rows[at + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        mech = cells[0].split(" (")[0]
        out[mech] = {m: c.split(" R ")[1] for m, c in zip(methods, cells[1:]) if " R " in c and m != "random"}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", type=Path)
    ap.add_argument("--table", type=Path, default=None, help="a published robustness table (markdown) instead")
    ap.add_argument("--held-out", required=True, help="comma-separated held-out model names")
    ap.add_argument("--mechanisms", default=None,
                    help="design=mechanism,... for held-out designs not yet released (default: their meta.json)")
    args = ap.parse_args(argv)
    held = [h.strip() for h in args.held_out.split(",") if h.strip()]
    given = dict(kv.split("=", 1) for kv in args.mechanisms.split(",")) if args.mechanisms else {}
    held_mech = {h: given.get(h) or mechanism_of(h) for h in held}
    if args.table is not None:
        cells = table_cells(args.table.read_text())
        preds = {h: dict(sorted(cells.get(m, {}).items())) for h, m in sorted(held_mech.items())}
    else:
        auroc: dict = {}
        for path in args.results:
            auroc.update(json.loads(path.read_text())["results"]["auroc"])
        tier = {c: mechanism_of(c) for c in auroc if "-siit-" not in c and c not in held_mech}
        preds = predictions({c: auroc[c] for c in tier}, tier, held_mech)
    n = sum(len(p) for p in preds.values())
    print(f"{n} predictions\n\n| model | method | prediction |\n| --- | --- | --- |")
    for design, row in preds.items():
        for method, v in row.items():
            print(f"| {design} | {method} | {v} |")
    print("\n```json\n" + json.dumps(preds, indent=1, sort_keys=True) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
