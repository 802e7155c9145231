"""Does each robust verdict of the hand-set stress tier survive training? (issue 45 item 4)

Reads two ``cbench bench`` result directories: one over the hand-set designs of the counterparted
mechanisms (every design of each mechanism), one over the SIIT-trained counterparts
(``stress-<design>-siit-<n>``). A method's **verdict** on a model is the tier's: ``fail`` (edge
AUROC <= 0.75), ``pass`` (>= 0.90), ``partial`` (in between). A (method, mechanism) verdict is
**robust** when it is the same on every hand-set design of that mechanism; it **survives** when
the trained counterpart gets the same verdict. Per-class AUROC (each ground-truth class against
the edges outside the circuit) is shown beside it for the counterpart and the design it was
trained against.

Usage::

    python benchmarks/compare_stress_siit.py --hand-set DIR --trained DIR [--md out.md] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cbench_builders.stress.siit import COUNTERPARTS

FAIL_AT_MOST, PASS_AT_LEAST = 0.75, 0.90


def verdict(x: float | None) -> str:
    if x is None or x != x:
        return "-"
    return "fail" if x <= FAIL_AT_MOST else "pass" if x >= PASS_AT_LEAST else "partial"


def load(d: Path) -> dict:
    doc = json.loads((d / "results.json").read_text())
    res = doc["results"]
    return {"auroc": res["auroc"], "per_class": (res.get("stress") or {}).get("per_class", {}),
            "mechanisms": (res.get("stress") or {}).get("mechanisms", {}), "methods": doc["inputs"]["methods"]}


def compare(hand: dict, trained: dict) -> dict:
    rows, per_class = [], []
    for model, mech in sorted(trained["mechanisms"].items()):
        design = "stress-" + COUNTERPARTS[model].design  # the design it was trained against
        designs = sorted(m for m, k in hand["mechanisms"].items() if k == mech)
        for meth in trained["methods"]:
            hv = {d: hand["auroc"].get(d, {}).get(meth) for d in designs}
            verdicts = {d: verdict(v) for d, v in hv.items()}
            robust = len(set(verdicts.values())) == 1 and "-" not in verdicts.values()
            t = trained["auroc"].get(model, {}).get(meth)
            rows.append({"model": model, "mechanism": mech, "design": design, "method": meth,
                         "hand_set": hv, "hand_set_verdicts": verdicts, "robust": robust,
                         "trained": t, "trained_verdict": verdict(t),
                         "survives": (verdict(t) == next(iter(verdicts.values()))) if robust else None})
            tc = trained["per_class"].get(model, {}).get(meth, {}) or {}
            hc = hand["per_class"].get(design, {}).get(meth, {}) or {}
            for cls in sorted(set(tc) | set(hc)):
                per_class.append({"model": model, "design": design, "method": meth, "class": cls,
                                  "hand_set": hc.get(cls), "trained": tc.get(cls)})
    robust = [r for r in rows if r["robust"] and r["method"] != "random"]
    held = [r for r in robust if r["survives"]]
    return {"rows": rows, "per_class": per_class, "robust": len(robust), "survived": len(held),
            "rate": len(held) / len(robust) if robust else None}


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown(c: dict) -> str:
    out = [f"Robust hand-set verdicts (the same on every design of the mechanism, random left out): "
           f"{c['robust']}; the trained counterpart got the same verdict on {c['survived']}"
           + (f" ({100 * c['rate']:.0f} %)." if c["rate"] is not None else "."), "",
           "| counterpart | method | hand-set edge AUROC (verdict) | robust | trained | survives |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in c["rows"]:
        hs = ", ".join(f"{d.removeprefix('stress-')} {_f(v)} ({r['hand_set_verdicts'][d]})" for d, v in r["hand_set"].items())
        out.append(f"| {r['model']} | {r['method']} | {hs} | {'yes' if r['robust'] else 'no'} | "
                   f"{_f(r['trained'])} ({r['trained_verdict']}) | "
                   f"{'-' if r['survives'] is None else 'yes' if r['survives'] else '**no**'} |")
    out += ["", "Per-class edge AUROC, the design the counterpart was trained against and the counterpart:", "",
            "| counterpart | method | class | hand-set | trained |", "| --- | --- | --- | --- | --- |"]
    for r in c["per_class"]:
        out.append(f"| {r['model']} | {r['method']} | {r['class']} | {_f(r['hand_set'])} | {_f(r['trained'])} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hand-set", type=Path, required=True)
    ap.add_argument("--trained", type=Path, required=True)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    for d in (a.hand_set, a.trained):
        if not (d / "results.json").is_file():
            print(f"error: no results.json in {d}", file=sys.stderr)
            return 2
    c = compare(load(a.hand_set), load(a.trained))
    text = markdown(c)
    print(text)
    if a.md:
        a.md.write_text(text)
    if a.json:
        a.json.write_text(json.dumps(c, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
