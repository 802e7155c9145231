"""Score the held-out stress predictions (docs/stress-held-out-predictions.md, committed before any
method ran on those models) against a bench's results.json: ``pass`` holds at edge AUROC >= 0.90,
``fail`` at <= 0.75 (cbench.scoring.stress_tier.verdict), the AUROC with the numerical resolution.

Usage: ``python benchmarks/stress_held_out.py RESULTS_JSON [--round 2]``: a markdown table and the hit
rate (round 1: the file's first JSON block; round 2: the block under its "## Round 2" heading).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from cbench.scoring.stress_tier import verdict

DOC = Path(__file__).resolve().parents[1] / "docs" / "stress-held-out-predictions.md"


def main(argv=None) -> int:
    argv = list(argv or sys.argv[1:])
    rnd = int(argv[argv.index("--round") + 1]) if "--round" in argv else 1
    results = json.loads(Path(argv[0]).read_text())["results"]["auroc"]
    text = DOC.read_text()
    if rnd > 1:
        text = text[text.index(f"## Round {rnd}"):]
    preds = json.loads(re.search(r"```json\n(.*?)\n```", text, re.S).group(1))
    held = total = 0
    print("| model | method | predicted | edge AUROC | held |\n| --- | --- | --- | ---: | --- |")
    for model, row in preds.items():
        for method, expect in row.items():
            value = results.get(model, {}).get(method)
            ok = value is not None and verdict(value) == expect
            held += ok
            total += 1
            print(f"| {model} | {method} | {expect} | {value:.3f} | {'yes' if ok else 'no'} |")
    print(f"\n{held} of {total} held ({100 * held / total:.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
