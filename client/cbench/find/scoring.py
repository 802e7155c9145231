"""Score interpreter submissions against the FIND suite (the paper's code-based indicators).

* numeric code: NMSE = E[(f - g)^2] / E[f^2] over the test grid points where ``f`` (noise-free)
  is defined; success when NMSE < 0.1. Code that gives no number at a defined point fails.
* string code: exact match on the function's 10 test inputs; success when all 10 match.
* corruption: for corrupted numeric functions, the reported interval's overlap (intersection
  over union, both clipped to [-128, 128]) with the true one; found when IoU >= 0.5.

Submitted code runs in :mod:`cbench.find.sandbox`; the answers never leave this process.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import cbench.about as cbench
from cbench.errors import SchemaError, UsageError
from cbench.find import functions as F
from cbench.find.sandbox import Limits, guarantees, resolve_boundary, run_submissions
from cbench.find.suite import FindSuite

NMSE_THRESHOLD = 0.1
IOU_THRESHOLD = 0.5
#: the paper's GPT-4 interpreter (Table 2): numeric NMSE < 0.1, strings exact match
PAPER_GPT4 = {"numeric": 0.33, "strings": 0.23}


#: the largest submissions file read (the released suite's 2,000 entries take well under 10 MiB)
MAX_SUBMISSION_BYTES = 256 << 20


@dataclass(frozen=True)
class Submission:
    """A submissions file as it was read, once: the validated document, where it came from, and
    the sha256 and size of exactly the bytes it was parsed from (what results.json records)."""

    doc: dict
    path: str
    sha256: str
    size: int

    def info(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.size}


def read_submission_file(path: str | os.PathLike) -> Submission:
    """Read a submissions file once (a regular file, at most MAX_SUBMISSION_BYTES) and parse,
    validate and hash those bytes: see :func:`read_submission`."""
    from cbench.files.safe_io import read_regular_file

    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such submissions file")
    data = read_regular_file(path, MAX_SUBMISSION_BYTES, "a submissions file", error=UsageError)
    return Submission(doc=parse_submission(data.decode("utf-8", errors="replace"), path), path=str(path),
                      sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def read_submission(path: str | os.PathLike) -> dict:
    """A submissions file (JSON Lines: one entry per line, or one ``find-submission`` JSON
    document) as a validated ``cbench/find-submission/v1`` document."""
    return read_submission_file(path).doc


def parse_submission(text: str, path: Path) -> dict:
    """The text of a submissions file as a validated ``cbench/find-submission/v1`` document."""
    from cbench.schemas import validate

    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply for json
        whole = None
    if isinstance(whole, dict) and "schema" in whole:
        doc = whole
    else:
        entries = [_loads(line, path, i) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
        doc = {"schema": "cbench/find-submission/v1", "entries": entries}
    problems = validate(doc, "find-submission")
    if problems:
        raise SchemaError(f"{path}: not a valid FIND submission", [str(p) for p in problems])
    from collections import Counter

    dup = sorted(i for i, n in Counter(e["id"] for e in doc["entries"]).items() if n > 1)
    if dup:
        raise UsageError(f"{path}: function(s) submitted more than once: {', '.join(dup[:10])}")
    return doc


def _loads(line: str, path: Path, lineno: int):
    try:
        return json.loads(line)
    except ValueError as exc:
        raise SchemaError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise SchemaError(f"{path}:{lineno}: not JSON (nested too deeply)") from None


def interval_iou(true, reported) -> float:
    def clip(iv):
        lo = F.GRID_LO if iv[0] is None else max(F.GRID_LO, float(iv[0]))
        hi = F.GRID_HI if iv[1] is None else min(F.GRID_HI, float(iv[1]))
        return lo, hi

    (a, b), (c, d) = clip(true), clip(reported)
    inter = max(0.0, min(b, d) - max(a, c))
    union = max(b, d) - min(a, c) if max(a, c) <= min(b, d) else (b - a) + (d - c)
    return inter / union if union > 0 else float(a == c and b == d)


def nmse(truth: np.ndarray, guess: np.ndarray) -> float:
    return float(np.mean((truth - guess) ** 2) / max(float(np.mean(truth ** 2)), 1e-12))


def sandbox_jobs(suite, entries) -> list[dict]:
    """What the sandbox receives for each entry: its key, the function's kind, the submitted code,
    and for string functions the inputs (never an answer)."""
    jobs = []
    for e in entries:
        fn = suite.functions[e["id"]]
        job = {"key": e["id"], "kind": fn.config, "code": e["code"]}
        if fn.config == "strings":
            job["inputs"] = list(fn.test_inputs)
        jobs.append(job)
    return jobs


def score(suite: FindSuite, submission: dict | Submission, *, limits: Limits = Limits(),
          all_functions: bool = False, trust_code: bool = False) -> dict:
    """Score a validated submission document, or a :class:`Submission` read by
    :func:`read_submission_file` (results.json then records its path and the sha256 of the bytes
    scored); returns a ``cbench/find-results/v1`` document. The code runs behind the sandbox's
    OS boundary, or not at all (SandboxUnavailableError), unless ``trust_code``."""
    import time

    from cbench.find.limits import check_limits

    t0 = time.perf_counter()
    check_limits(limits)
    source = submission if isinstance(submission, Submission) else None
    submission = source.doc if source else submission
    entries = submission["entries"]
    unknown = [e["id"] for e in entries if e["id"] not in suite.functions]
    if unknown:
        raise UsageError(f"submission names function(s) the suite does not have: {', '.join(unknown[:10])}"
                         + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
    grid = F.test_grid()
    jobs = sandbox_jobs(suite, entries)
    boundary = resolve_boundary(trust_code, [suite.root])
    outcomes = run_submissions(jobs, grid.tolist(), limits, trust_code=trust_code, boundary=boundary,
                               private_paths=[suite.root])

    rows = []
    for e in entries:
        fn = suite.functions[e["id"]]
        out = outcomes[e["id"]]
        row = {"id": fn.id, "config": fn.config, "subcategory": fn.subcategory, "family": fn.family,
               "success": False, "reason": None}
        if fn.config == "numeric":
            truth = F.numeric_mean(fn.spec, grid, suite.weights)
            defined = np.isfinite(truth)
            row["nmse"] = None
            if not out.ok:
                row["reason"] = out.reason
            else:
                g = np.array([np.nan if v is None else v for v in out.outputs], dtype=float)
                missing = int(np.sum(defined & ~np.isfinite(g)))
                if missing:
                    row["reason"] = f"code gave no number at {missing} of {int(defined.sum())} test points"
                else:
                    row["nmse"] = _finite(nmse(truth[defined], g[defined]))
                    row["success"] = row["nmse"] is not None and row["nmse"] < NMSE_THRESHOLD
                    if not row["success"]:
                        row["reason"] = f"NMSE {row['nmse']:.3g} >= {NMSE_THRESHOLD}" if row["nmse"] is not None \
                            else "NMSE is not finite"
            reported = e.get("interval")
            if fn.interval is not None:
                row["interval_iou"] = 0.0 if reported is None else round(interval_iou(fn.interval, reported), 4)
                row["interval_found"] = row["interval_iou"] >= IOU_THRESHOLD
            else:
                row["false_interval"] = reported is not None
        else:
            row["matched"] = 0
            if not out.ok:
                row["reason"] = out.reason
            else:
                row["matched"] = sum(a == b for a, b in zip(out.outputs, fn.test_outputs))
                row["success"] = row["matched"] == len(fn.test_outputs)
                if not row["success"]:
                    row["reason"] = f"{row['matched']} of {len(fn.test_outputs)} test outputs match"
        rows.append(row)
    if all_functions:
        seen = {e["id"] for e in entries}
        for fid, fn in suite.functions.items():
            if fid not in seen:
                row = {"id": fid, "config": fn.config, "subcategory": fn.subcategory, "family": fn.family,
                       "success": False, "reason": "not submitted"}
                if fn.config == "numeric":
                    row["nmse"] = None
                    if fn.interval is not None:
                        row.update(interval_iou=0.0, interval_found=False)
                else:
                    row["matched"] = 0
                rows.append(row)
    results = {
        "schema": "cbench/find-results/v1",
        "suite": {k: v for k, v in suite.source.items() if v is not None},
        "submission": source.info() if source else {"entries": len(entries)},
        "summary": summarise(rows, suite),
        "functions": rows,
        "limits": {k: v for k, v in vars(limits).items()},
        "sandbox": guarantees(boundary),
        "cbench_version": cbench.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "runtime_s": round(time.perf_counter() - t0, 2),
    }
    if submission.get("interpreter"):
        results["interpreter"] = submission["interpreter"]
    return results


def _finite(v: float):
    return round(v, 6) if math.isfinite(v) else None


def summarise(rows: list[dict], suite: FindSuite | None = None) -> dict:
    """Success rates per config and per sub-category (the paper's Table 2 / Figure 5 layout)."""
    out: dict = {}
    for config in ("numeric", "strings"):
        rs = [r for r in rows if r["config"] == config]
        if not rs:
            continue
        subs: dict = {}
        for r in rs:
            subs.setdefault(r["subcategory"], []).append(r["success"])
        entry = {"n": len(rs), "successes": sum(r["success"] for r in rs),
                 "success_rate": round(sum(r["success"] for r in rs) / len(rs), 4),
                 "paper_gpt4": PAPER_GPT4[config],
                 "by_subcategory": {k: {"n": len(v), "success_rate": round(sum(v) / len(v), 4)}
                                    for k, v in sorted(subs.items())}}
        if config == "numeric":
            cor = [r for r in rs if "interval_found" in r]
            clean = [r for r in rs if "false_interval" in r]
            entry["corruption"] = {
                "n": len(cor), "interval_found_rate": round(sum(r["interval_found"] for r in cor) / len(cor), 4)
                if cor else None,
                "mean_iou": round(float(np.mean([r["interval_iou"] for r in cor])), 4) if cor else None,
                "false_interval_rate": round(sum(r["false_interval"] for r in clean) / len(clean), 4)
                if clean else None}
        out[config] = entry
    return out


def format_table(results: dict) -> str:
    """Plain-text Table 2 (overall) and Figure 5 (sub-categories) of a results document."""
    s = results["summary"]
    lines = ["indicator                    this run   paper GPT-4"]
    if "numeric" in s:
        lines.append(f"numeric  NMSE < 0.1           {s['numeric']['success_rate']:>6.2f}   {PAPER_GPT4['numeric']:>8.2f}"
                     f"   ({s['numeric']['successes']}/{s['numeric']['n']})")
    if "strings" in s:
        lines.append(f"strings  exact match          {s['strings']['success_rate']:>6.2f}   {PAPER_GPT4['strings']:>8.2f}"
                     f"   ({s['strings']['successes']}/{s['strings']['n']})")
    lines.append("")
    lines.append("sub-category                 n   success")
    for config in ("numeric", "strings"):
        for sub, v in (s.get(config) or {}).get("by_subcategory", {}).items():
            lines.append(f"{config + '/' + sub:<24} {v['n']:>5}   {v['success_rate']:.2f}")
    cor = (s.get("numeric") or {}).get("corruption")
    if cor and cor["n"]:
        lines.append("")
        lines.append(f"corrupted interval found (IoU >= {IOU_THRESHOLD}): {cor['interval_found_rate']:.2f} of "
                     f"{cor['n']} (mean IoU {cor['mean_iou']:.2f}); false intervals on clean functions: "
                     f"{cor['false_interval_rate'] if cor['false_interval_rate'] is not None else 'n/a'}")
    return "\n".join(lines)
