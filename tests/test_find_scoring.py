"""FIND runner, scoring and baseline: black boxes reveal nothing, ground truth scores 1,
wrong and hostile code scores 0 with a reason, the baseline beats nothing-at-all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _find_helpers import small_suite, small_suite_dir
from cbench.errors import SchemaError, UsageError
from cbench.find import functions as F
from cbench.find.baseline import interpret_numeric, interpret_string, run_baseline
from cbench.find.sandbox import Limits
from cbench.find.scoring import format_table, interval_iou, nmse, read_submission, score
from cbench.schemas import validate

LIMITS = Limits(wall_s=10.0, cpu_s=5)


def cli(*args, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "cbench.cli", "find", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _submission(entries):
    return {"schema": "cbench/find-submission/v1", "entries": entries}


def _truth_code(fn) -> str:
    if fn.config == "strings":
        return fn.code
    return f"import numpy as np\n\ndef f(x):\n    return float(_expr(np.float64(x)))\n\ndef _expr(x):\n    return {fn.code}\n"


# ------------------------------------------------------------------ the runner
def test_black_box_reveals_nothing_but_outputs():
    suite = small_suite()
    fid = next(i for i, f in suite.functions.items() if f.spec["kind"] == "atomic")
    box = suite.black_box(fid)
    assert not hasattr(box, "__dict__")
    assert {a for a in dir(box) if not a.startswith("__")} == {"id", "config", "_call"}
    fn = suite.functions[fid]
    proc = cli("call", fid, "--suite", small_suite_dir(), "--", "-3", "0", "2.5")
    assert proc.returncode == 0
    out = proc.stdout
    assert out.startswith("(-3, ") and "(2.5, " in out
    for secret in (fn.family, fn.code, json.dumps(fn.spec), "np.", "params"):
        assert secret not in out
    for v in fn.spec.get("params", {}).values():
        assert f"{v!r}" not in out.split(") (")[0].split(", ")[0]


def test_noise_is_fresh_per_call_and_seedable():
    suite = small_suite()
    fid = next(i for i, f in suite.functions.items() if f.spec["kind"] == "noisy")
    x = [1.0, 2.0, 3.0]
    a, b = suite.call(fid, x), suite.call(fid, x)
    assert a != b
    assert suite.call(fid, x, seed=3) == suite.call(fid, x, seed=3)
    mean = F.numeric_mean(suite.functions[fid].spec, np.array(x))
    many = np.array([suite.call(fid, x, seed=s) for s in range(300)])
    assert np.allclose(many.mean(axis=0), mean, atol=5 * many.std(axis=0).max() / np.sqrt(300) + 1e-9) or \
        suite.functions[fid].spec["noise"]["dist"] == "poisson"


def test_runner_refuses_bad_inputs_and_ids():
    d = small_suite_dir()
    proc = cli("call", "n0000", "abc", "--suite", d)
    assert proc.returncode == 2 and "take numbers" in proc.stderr
    proc = cli("call", "n9999", "1", "--suite", d)
    assert proc.returncode == 2 and "no FIND function" in proc.stderr
    proc = cli("call", "n0000", "--suite", d)
    assert proc.returncode == 2 and "at least one input" in proc.stderr


# ------------------------------------------------------------------ scoring
def test_interval_iou_and_nmse():
    assert interval_iou((10, 20), (10, 20)) == 1.0
    assert interval_iou((10, 20), (15, 25)) == pytest.approx(5 / 15)
    assert interval_iou((10, 20), (30, 40)) == 0.0
    assert interval_iou((None, 0), (-128, 0)) == 1.0
    assert interval_iou((50, None), (50, 1000)) == 1.0
    t = np.array([1.0, 2.0, 3.0])
    assert nmse(t, t) == 0.0 and nmse(t, 0 * t) == 1.0


@pytest.fixture(scope="module")
def truth_results():
    suite = small_suite()
    entries = []
    for fid, fn in suite.functions.items():
        if fn.spec["kind"] == "mlp":
            continue  # its code is a description, not code
        e = {"id": fid, "code": _truth_code(fn)}
        if fn.config == "numeric":
            e["interval"] = list(fn.interval) if fn.interval else None
            if fn.spec["kind"] == "corrupted":  # the true function with its mean on the interval
                base = F.numeric_code(fn.spec["base"])
                cond = " & ".join(c for c in ((f"(x >= {fn.interval[0]!r})" if fn.interval[0] is not None else ""),
                                              (f"(x <= {fn.interval[1]!r})" if fn.interval[1] is not None else "")) if c)
                e["code"] = (f"import numpy as np\n\ndef f(x):\n    x = np.float64(x)\n"
                             f"    return float(np.where({cond}, {fn.spec['mu']!r}, {base}))\n")
            if fn.spec["kind"] == "noisy":
                e["code"] = _truth_code(fn).replace(fn.code, F.numeric_code(fn.spec["base"]))
        entries.append(e)
    return score(suite, _submission(entries), limits=LIMITS)


def test_ground_truth_code_succeeds_everywhere(truth_results):
    assert validate(truth_results, "find-results") == []
    failed = [r for r in truth_results["functions"] if not r["success"]]
    assert failed == []
    s = truth_results["summary"]
    assert s["numeric"]["success_rate"] == 1.0 and s["strings"]["success_rate"] == 1.0
    assert s["numeric"]["corruption"]["interval_found_rate"] == 1.0
    assert s["numeric"]["corruption"]["false_interval_rate"] == 0.0
    table = format_table(truth_results)
    assert "0.33" in table and "0.23" in table and "numeric/corrupted" in table


def test_wrong_and_hostile_code_fails_with_reasons():
    suite = small_suite()
    nid = suite.ids("numeric")[0]
    sid = suite.ids("strings")[0]
    nid2, nid3, nid4 = suite.ids("numeric")[1:4]
    res = score(suite, _submission([
        {"id": nid, "code": "def f(x):\n    return 0.0\n"},
        {"id": sid, "code": "def f(x):\n    return x\n"},
        {"id": nid2, "code": "def f(x):\n    return float(len(open('/etc/hostname').read()))\n"},
        {"id": nid3, "code": "import socket\n\ndef f(x):\n    return x\n"},
        {"id": nid4, "code": "def f(x):\n    while True:\n        pass\n"},
    ]), limits=Limits(wall_s=4.0, cpu_s=2))
    rows = {r["id"]: r for r in res["functions"]}
    assert all(not r["success"] for r in rows.values())
    assert rows[nid]["reason"].startswith("NMSE")
    assert "test outputs match" in rows[sid]["reason"]
    assert "tried to open a file" in rows[nid2]["reason"]
    assert "tried to open a socket" in rows[nid3]["reason"]
    assert "CPU time" in rows[nid4]["reason"] or "ran longer" in rows[nid4]["reason"]
    assert validate(res, "find-results") == []


def test_submission_files_are_validated(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "n0000", "code": "def f(x):\\n    return x\\n"}\n\n{"id": "s0001", "code": "def f(x): return x"}\n')
    assert len(read_submission(p)["entries"]) == 2
    example = Path(__file__).resolve().parents[1] / "schemas/examples/find-submission/valid-three-entries.json"
    assert [e["id"] for e in read_submission(example)["entries"]] == ["n0001", "n0002", "s0000"]
    p.write_text("")
    with pytest.raises(SchemaError, match="must not be empty|at least 1"):
        read_submission(p)
    p.write_text('{"id": "n0000"}\n')
    with pytest.raises(SchemaError, match="missing required field 'code'"):
        read_submission(p)
    p.write_text('{"id": "n0000", "code": "x"}\n{"id": "n0000", "code": "y"}\n')
    with pytest.raises(UsageError, match="more than once"):
        read_submission(p)
    p.write_text("not json\n")
    with pytest.raises(SchemaError, match="not JSON"):
        read_submission(p)
    with pytest.raises(UsageError, match="no such"):
        read_submission(tmp_path / "missing.jsonl")
    p.write_text('{"id": "n9999", "code": "def f(x): return x"}\n')
    with pytest.raises(UsageError, match="does not have"):
        score(small_suite(), read_submission(p))


# ------------------------------------------------------------------ the baseline
def test_baseline_recovers_clean_functions_exactly():
    suite = small_suite()
    for fid, fn in suite.functions.items():
        if fn.config == "numeric" and fn.spec["kind"] == "atomic" and fn.family in ("linear", "relu", "sin", "step"):
            entry = interpret_numeric(suite.black_box(fid, seed=0))
            ns: dict = {}
            exec(entry["code"], ns)
            x = F.test_grid()
            truth = F.numeric_mean(fn.spec, x)
            assert nmse(truth, np.array([ns["f"](v) for v in x])) < 1e-3, (fid, fn.family, entry["description"])
    for fid in suite.ids("strings")[:8]:
        entry = interpret_string(suite.black_box(fid))
        ns = {}
        exec(entry["code"], ns)
        fn = suite.functions[fid]
        assert [ns["f"](s) for s in fn.test_inputs] == list(fn.test_outputs), (fid, fn.family)


def test_baseline_cli_writes_a_submission_that_scores(tmp_path):
    d = small_suite_dir()
    sub = tmp_path / "sub.jsonl"
    ids = ",".join(small_suite().ids("numeric")[:6] + small_suite().ids("strings")[:6])
    proc = cli("baseline", "--suite", d, "--ids", ids, "--out", sub)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in sub.read_text().splitlines()]
    assert len(lines) == 12 and all("code" in e for e in lines)
    res_path = tmp_path / "res.json"
    proc = cli("score", sub, "--suite", d, "--out", res_path)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(res_path.read_text())
    assert validate(res, "find-results") == []
    assert res["summary"]["numeric"]["n"] == 6 and res["summary"]["strings"]["n"] == 6
    assert res["summary"]["numeric"]["success_rate"] >= 0.5 and res["summary"]["strings"]["success_rate"] >= 0.5
    assert "paper GPT-4" in proc.stdout


def test_cli_usage_errors(tmp_path):
    d = small_suite_dir()
    proc = cli("score", tmp_path / "nope.jsonl", "--suite", d)
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
    proc = cli("baseline", "--suite", tmp_path / "nowhere")
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    proc = cli("baseline", "--suite", d, "--limit", "0")
    assert proc.returncode == 2


@pytest.mark.slow
def test_baseline_on_the_whole_small_suite():
    suite = small_suite()
    res = score(suite, _submission(run_baseline(suite)), limits=LIMITS)
    assert res["summary"]["numeric"]["success_rate"] >= 0.7
    assert res["summary"]["strings"]["success_rate"] >= 0.8
