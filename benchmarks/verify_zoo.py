"""``cbench verify`` over every released SIIT model, from a fresh ``$CBENCH_HOME``.

For each SIIT model in ``model_zoo/releases/index.json`` (its newest version, what ``cbench pull``
gives): ``cbench pull <name>`` and ``cbench verify <name> --json`` through the CLI's own entry point
(one process for all of them, so the import cost is paid once), in a home that starts empty and is
seeded from this checkout's zoo as a user's first command would seed it. Prints one line per model
(PASS/FAIL, the worst complement edge effect and IIA over the validation split and the fresh pairs,
the failed gates, seconds) and writes every report to ``--out`` as JSON lines; with ``--resume``
the models already in ``--out`` are skipped, so a long run can be stopped and continued.

Usage::

    python benchmarks/verify_zoo.py                              # every released SIIT model
    python benchmarks/verify_zoo.py --models case-3,case-124     # some of them
    python benchmarks/verify_zoo.py --out /tmp/verify.jsonl --resume

Exit 0 when every model passes every gate, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def released_siit_models(zoo: Path = ROOT / "model_zoo") -> list[tuple[str, str]]:
    """(name, newest version) of every released SIIT model of the zoo's index, in index order."""
    index = json.loads((zoo / "releases" / "index.json").read_text())
    out = []
    for case in index["cases"]:
        for model in case["models"]:
            if model["model_kind"] == "siit" and model.get("versions"):
                out.append((model["name"], model["versions"][-1]["version"]))
    return out


def _cli(args: list[str]) -> tuple[int, str, str]:
    """``cbench <args>`` in this process: (exit code, stdout, stderr)."""
    from cbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def verify_one(name: str) -> dict:
    """Pull and verify one model; a row with the figures (or the error)."""
    start = time.perf_counter()
    cpu = time.process_time()
    row: dict = {"model": name}
    code, _, err = _cli(["pull", name])
    if code != 0:
        row.update(passed=False, error=f"pull: {err.strip().splitlines()[-1] if err.strip() else code}")
    else:
        code, out, err = _cli(["verify", name, "--json"])
        try:
            report = json.loads(out)
        except json.JSONDecodeError:
            report = None
        if report is None:
            row.update(passed=False, error=f"verify: {err.strip().splitlines()[-1] if err.strip() else code}")
        else:
            gates = report["gates"]

            def worst(gate: str, pick) -> float | None:
                values = [g["value"] for g in gates if g["name"] == gate]
                return pick(values) if values else None

            row.update(passed=bool(report["passed"]) and code == 0, n_gates=len(gates),
                       failed=[f"{g['name']} {g['pairs']} {g['value']:.4f}" for g in gates if not g["passed"]],
                       complement=worst("complement_edge_effect", max), iia=worst("iia", min),
                       siia=worst("siia", min), n_pairs=report["n_pairs"], report=report)
    row.update(seconds=round(time.perf_counter() - start, 1), cpu_s=round(time.process_time() - cpu, 1))
    return row


def line(row: dict) -> str:
    if "error" in row:
        return f"FAIL  {row['model']:<14} {row['error']}  ({row['seconds']} s)"
    fig = f"complement {row['complement']:.4f}" if row.get("complement") is not None else "complement -"
    fig += f", IIA {row['iia']:.4f}" if row.get("iia") is not None else ""
    return (f"{'PASS' if row['passed'] else 'FAIL'}  {row['model']:<14} {fig}, "
            f"{row['n_gates'] - len(row['failed'])}/{row['n_gates']} gates"
            + (f"; failed: {', '.join(row['failed'])}" if row["failed"] else "") + f"  ({row['seconds']} s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help="comma-separated model names (default: every released SIIT model)")
    ap.add_argument("--home", type=Path, help="CBENCH_HOME to use (default: a fresh temporary one)")
    ap.add_argument("--out", type=Path, help="write every row (with its report) here as JSON lines")
    ap.add_argument("--resume", action="store_true", help="skip the models already in --out")
    args = ap.parse_args(argv)
    models = [n for n, _ in released_siit_models()]
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = sorted(set(wanted) - set(models))
        if unknown:
            print(f"error: not a released SIIT model: {', '.join(unknown)}", file=sys.stderr)
            return 2
        models = wanted
    done: dict[str, dict] = {}
    if args.resume and args.out and args.out.is_file():
        for raw in args.out.read_text().splitlines():
            if raw.strip():
                row = json.loads(raw)
                done[row["model"]] = row
    with tempfile.TemporaryDirectory(prefix="cbench-verify-zoo-") as tmp:
        home = args.home or Path(tmp) / "home"
        os.environ["CBENCH_HOME"] = str(home)
        print(f"CBENCH_HOME={home}; {len(models)} model(s)", flush=True)
        rows = []
        for name in models:
            if name in done:
                rows.append(done[name])
                print(line(done[name]) + "  [from --out]", flush=True)
                continue
            row = verify_one(name)
            rows.append(row)
            print(line(row), flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    failed = [r["model"] for r in rows if not r["passed"]]
    print(f"{len(rows) - len(failed)} of {len(rows)} pass every gate"
          + (f"; failing: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
