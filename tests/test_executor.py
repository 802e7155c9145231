"""The executors (local and Ray) and `cbench bench` through them: same files as the serial run
(up to the clock readings), resumable, bad options refused with one line."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

import _report_toy as R
from cbench.errors import CbenchError, UsageError
from cbench.scoring.executor import (LocalExecutor, Outcome, ProcessExecutor, make_executor, progress_line,
                                    run_task)
from hub_helpers import run_in_process


run = run_in_process  # cbench ARGV in this process: (exit code, stdout, stderr)


def _square(x):
    if x == 3:
        raise CbenchError("three is refused")
    if x == 4:
        raise ValueError("four breaks")
    return x * x


def test_local_executor_runs_in_order_and_turns_errors_into_outcomes():
    seen = []
    LocalExecutor().map(_square, [1, 2, 3, 4], lambda t, o, n, total: seen.append((t, o, n, total)))
    assert [(t, n, total) for t, _, n, total in seen] == [(1, 1, 4), (2, 2, 4), (3, 3, 4), (4, 4, 4)]
    assert [o.value for _, o, _, _ in seen[:2]] == [1, 4] and all(o.ok for _, o, _, _ in seen[:2])
    assert seen[2][1] == Outcome(False, error="three is refused", cbench_error=True, where=seen[2][1].where)
    assert not seen[3][1].ok and seen[3][1].error == "internal error: ValueError: four breaks"
    assert not seen[3][1].cbench_error
    line = progress_line(3, 4, "case 3, acdc", seen[2][1], time.perf_counter())
    assert line.startswith("[3/4 ") and "case 3, acdc: failed (three is refused)" in line


def test_make_executor_refuses_options_of_the_other_executor():
    assert make_executor("local").name == "local"
    assert make_executor("local", workers=1).name == "local"
    assert make_executor("local", workers=2).name == "processes"
    for kwargs, needle in (({"address": "auto"}, "--ray-address needs --executor ray"),
                           ({"workers": 0}, "--workers must be at least 1"),):
        with pytest.raises(UsageError, match=needle):
            make_executor("local", **kwargs)
    with pytest.raises(UsageError, match="--executor must be one of local, ray"):
        make_executor("dask")


def test_bench_through_an_executor_writes_the_serial_files(tmp_path, capsys):
    """The executor path (tasks dispatched, results written as they arrive, then scored) gives
    the serial loop's files; a second run through it finds every task finished."""
    from cbench.scoring.bench import run_bench

    cases = R.write_cases(tmp_path / "cases")
    code, _, err = run(capsys, *R.bench_args(cases, tmp_path / "serial"))
    assert code == 0, err
    lines = []
    run_bench(cases, R.METHODS, str(tmp_path / "pooled"), n_examples=16, sampled=True, echo=lines.append,
              executor=LocalExecutor())
    assert "6 discovery task(s) to run on local (0 finished before)" in lines
    assert sum(line.startswith("[") and ": ok (" in line and "CPR and CMD" not in line for line in lines) == 6
    # then CPR and CMD of every method's scores, one task per case
    assert sorted(line.split("] ", 1)[1].split(":")[0] for line in lines if "CPR and CMD: ok (" in line) == \
        ["case toy3, CPR and CMD", "case toy4, CPR and CMD"]
    serial, pooled = R.tree(tmp_path / "serial"), R.tree(tmp_path / "pooled")
    assert sorted(serial) == sorted(pooled) and "scores/toy4/acdc.json" in serial and "roc_toy4.png" in serial
    for name in serial:
        assert R.normalized(serial[name]) == R.normalized(pooled[name]), name
    stamp = (tmp_path / "pooled" / "scores" / "toy3" / "eap.json").stat().st_mtime_ns
    lines.clear()
    run_bench(cases, R.METHODS, str(tmp_path / "pooled"), n_examples=16, sampled=True, echo=lines.append,
              executor=LocalExecutor())
    assert "0 discovery task(s) to run on local (6 finished before)" in lines
    assert (tmp_path / "pooled" / "scores" / "toy3" / "eap.json").stat().st_mtime_ns == stamp


def test_process_executor_hands_back_every_outcome_and_survives_errors():
    seen = []
    ProcessExecutor(2).map(_square, [1, 2, 3, 4, 5], lambda t, o, n, total: seen.append((t, o, n, total)))
    assert sorted(t for t, *_ in seen) == [1, 2, 3, 4, 5] and [n for _, _, n, _ in seen] == [1, 2, 3, 4, 5]
    by_task = {t: o for t, o, _, _ in seen}
    assert [by_task[i].value for i in (1, 2, 5)] == [1, 4, 25]
    assert by_task[3].cbench_error and by_task[3].error == "three is refused"
    assert by_task[4].error == "internal error: ValueError: four breaks"
    assert len({by_task[i].where for i in (1, 2, 3, 4, 5)} - {""}) >= 1  # ran in the workers, not here
    assert all(not o.where.endswith(f":{os.getpid()}") for o in by_task.values())


def test_bench_on_two_local_processes_writes_the_serial_files(tmp_path, capsys):
    """`cbench bench --workers 2`: the tasks run on two forked processes, longest first, with CPR and
    CMD measured in them; the files equal the serial run's (up to clock readings)."""
    cases = R.write_cases(tmp_path / "cases")
    code, _, err = run(capsys, *R.bench_args(cases, tmp_path / "serial"))
    assert code == 0, err
    code, out, err = run(capsys, *R.bench_args(cases, tmp_path / "procs"), "--workers", "2")
    assert code == 0, err
    assert "6 discovery task(s) to run on processes (0 finished before)" in out
    assert out.count(": ok (") == 6 + 2  # the tasks, then CPR and CMD of each case
    serial, procs = R.tree(tmp_path / "serial"), R.tree(tmp_path / "procs")
    assert sorted(serial) == sorted(procs)
    for name in serial:
        assert R.normalized(serial[name]) == R.normalized(procs[name]), name


def test_bench_executor_option_errors(tmp_path, capsys):
    code, _, err = run(capsys, "bench", "--cases", "3", "--out", str(tmp_path / "o"), "--ray-address", "auto")
    assert code == 2 and err.strip() == "error: --ray-address needs --executor ray"
    code, _, err = run(capsys, "bench", "--cases", "3", "--out", str(tmp_path / "o"), "--executor", "spark")
    assert code == 2 and "'spark' is not one of 'local', 'ray'" in err and "Traceback" not in err


# default suite (issue 21): 21 s here with two niced trainings beside it; 543 s under load ~20
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'cbench[ray]')")
@pytest.mark.slow  # > 20 s: `make test-slow`
def test_bench_on_local_ray_with_two_cpus_matches_the_serial_run(tmp_path, capsys):
    cases = R.write_cases(tmp_path / "cases")
    code, _, err = run(capsys, *R.bench_args(cases, tmp_path / "serial"))
    assert code == 0, err
    code, out, err = run(capsys, *R.bench_args(cases, tmp_path / "ray"), "--executor", "ray", "--workers", "2")
    assert code == 0, err
    assert "with 2 CPUs" in err and "6 discovery task(s) to run on ray" in out
    assert out.count(": ok (") == 6 + 2  # the tasks, then CPR and CMD of each case
    serial, ray = R.tree(tmp_path / "serial"), R.tree(tmp_path / "ray")
    assert sorted(serial) == sorted(ray)
    for name in serial:
        assert R.normalized(serial[name]) == R.normalized(ray[name]), name
    # byte for byte where no clock is written: the scores' edges and every plot
    assert (serial["roc_toy3.png"].read_bytes() == ray["roc_toy3.png"].read_bytes())


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'cbench[ray]')")
@pytest.mark.slow  # > 20 s: `make test-slow`
def test_build_tracr_on_local_ray_writes_the_serial_artifacts(tmp_path, capsys):
    """The other batch builder: `cbench build tracr --executor ray` compiles each case as a Ray task
    and writes the same artifact files as the serial build (weights and circuit byte for byte)."""
    code, _, err = run(capsys, "build", "tracr", "--cases", "3", "--out", str(tmp_path / "serial"), "--jobs", "1",
                       "--no-dataset")
    assert code == 0, err
    code, out, err = run(capsys, "build", "tracr", "--cases", "3", "--out", str(tmp_path / "ray"), "--no-dataset",
                         "--executor", "ray", "--workers", "1")
    assert code == 0, err
    assert "[1/1" in err and "case 3: ok" in err and "(ray executor)" in out
    for name in ("model.safetensors", "circuit.json", "config.json", "tokenizer.json"):
        assert ((tmp_path / "serial" / "tracr-case-3" / name).read_bytes()
                == (tmp_path / "ray" / "tracr-case-3" / name).read_bytes()), name


def test_parallel_siit_builds_take_the_longest_cases_first():
    """`cbench build siit --executor ray` hands the cases to its workers longest first (by each spec's
    time budget), so the two 2,400-s cases of the main 16 do not start last on a busy worker."""
    from cbench_builders.cases.specs import MAIN_CASES
    from cbench_builders.siit.build import SIITTask, _budget_of

    tasks = [SIITTask(str(c), None, None, False, {}, False, None, False) for c in MAIN_CASES]
    ordered = [t.case for t in sorted(tasks, key=_budget_of, reverse=True)]
    assert ordered[:3] == ["18", "21", "4"]  # 2,400, 2,400 and 1,500 s; the others 1,200 s, in their order
    assert ordered[3:] == [c for c in map(str, MAIN_CASES) if c not in ("18", "21", "4")]
