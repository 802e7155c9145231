"""The stress tier's method x mechanism table over several designs per mechanism (issue 45): merge the
results.json of one or more ``cbench bench`` runs, and print the robustness table (per cell: mean
edge AUROC, spread over designs, R = the same verdict on every design, D = design-dependent;
:func:`cbench.scoring.stress_tier.robustness_table`) and the discrimination figures of the merged
tier (spread of means and median per-model spread over the real methods but IFR, saturated models,
random's mean).

Usage: ``python benchmarks/stress_robustness.py RESULTS_JSON [RESULTS_JSON ...]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from cbench.scoring.discrimination import DEFAULT_EXCLUDE, discrimination
from cbench.scoring.stress_tier import robustness_markdown, robustness_table

ZOO = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"


def mechanism_of(case: str) -> str:
    version = sorted((ZOO / case).iterdir(), key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))[-1]
    return json.loads((version / "meta.json").read_text())["high_level"]["mechanism"]


def main(argv=None) -> int:
    auroc: dict = {}
    for path in argv or sys.argv[1:]:
        auroc.update(json.loads(Path(path).read_text())["results"]["auroc"])
    methods = list(dict.fromkeys(m for row in auroc.values() for m in row))
    table = robustness_table(auroc, {c: mechanism_of(c) for c in auroc}, methods)
    print(robustness_markdown(table, methods))
    robust = sum(c["robust"] for row in table.values() for c in row.values() if c["n"] >= 2)
    cells = sum(1 for row in table.values() for c in row.values() if c["n"] >= 2)
    print(f"robust cells: {robust} of {cells} with two designs or more\n")
    d = discrimination(auroc, methods, exclude=(*DEFAULT_EXCLUDE, "ifr"))
    rnd = [row["random"] for row in auroc.values() if row.get("random") is not None]
    print(f"models {len(auroc)}; real methods but IFR: spread of means {d['spread_of_means']:.3f}, median per-model "
          f"spread {d['median_model_spread']:.3f}, saturated (all >= 0.95) {d['saturated_models']} of {len(auroc)}; "
          f"random mean {np.mean(rnd):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
