"""Fuzzing: malformed arguments and files for every command through the real CLI (in-process), and
mutated pickles through the restricted unpickler (in a child process).

The property: whatever the input, cbench answers with exit 0, 1 or 2, never a traceback; a failure
is exactly one ``error:`` line on stderr (``validate`` reports bad files on stdout, one line each);
devices are never replaced. The default run is bounded (well under 60 s); the ``slow`` variants run
ten times more examples.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_inprocess import run_main
from hub_helpers import write_tiny_artifact

HERE = Path(__file__).resolve().parent
CLI_EXAMPLES = 120
PICKLES = 1000


# ---------------------------------------------------------------------------- the world commands see
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    case = root / "case-3"
    write_tiny_artifact(case)
    home = root / "home"
    env = {"CBENCH_HOME": str(home), "HF_HUB_OFFLINE": "1", "CBENCH_HUB": None, "CBENCH_ENDPOINT": None,
           "CBENCH_THREADS": "1"}
    res = run_main(["discover", str(case), "-m", "random", "--sampled", "--n-examples", "4",
                    "--out", str(root / "scores.json")], env)
    assert res.code == 0, res.stderr
    (root / "adir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "loop").symlink_to(root / "loop")
    ib = root / "ib"
    ib.mkdir()
    for name in ("ll_model.pth", "ll_model_cfg.pkl", "edges.pkl"):
        (ib / name).write_bytes(b"\x80\x04N.")
    return {"root": root, "case": str(case), "scores": str(root / "scores.json"), "env": env, "ib": str(ib),
            "counter": itertools.count()}


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
numbers = st.sampled_from(["-1", "0", "1", "2", "99999999999", "1e999", "nan", "-0", "0x10", "", " ", "3.5",
                           "18446744073709551617", "100001", "1000001"])
weird_names = st.sampled_from(["", " ", "-", "--", "case-", "case-3@", "@v1.0.0", "case-3@v1", "cbench/", "/x",
                               "../../etc/passwd", "case-3@" + "0" * 40, "a" * 300, "case-\x00", "ca\nse",
                               "tracr-case-9999", "org/name/extra", "cbench/case-3@v1.0.0@v2"])
methods = st.sampled_from(["acdc", "eap", "random", "sp", "nope", "", "ACDC", "eap-ig"])


@st.composite
def paths(draw, world_ref):
    """Existing and missing paths, special files, and fresh files with random or JSON-ish content."""
    w = world_ref
    kind = draw(st.sampled_from(["dev", "dir", "fifo", "missing", "loop", "empty", "bytes", "json", "name",
                                 "nested-missing"]))
    root = w["root"]
    if kind == "dev":
        return draw(st.sampled_from(["/dev/null", "/dev/zero", "/dev/full"]))
    if kind == "dir":
        return str(root / "adir")
    if kind == "fifo":
        return str(root / "fifo")
    if kind == "loop":
        return str(root / "loop")
    if kind == "missing":
        return str(root / "missing" / "x.json")
    if kind == "nested-missing":
        return str(root / "adir" / "new-dir" / "f.json")
    if kind == "name":
        return draw(st.sampled_from(["", " ", "\t"]))
    p = root / f"f{next(w['counter'])}.json"
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "bytes":
        p.write_bytes(draw(st.binary(max_size=300)))
    else:
        json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
                                   lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4),
                                   max_leaves=12)
        doc = draw(st.fixed_dictionaries({"schema": st.sampled_from(["cbench/edge-scores/v1", "cbench/circuit/v1",
                                                                     "cbench/circuits-at-sizes/v1", "x"])},
                                         optional={"case": text, "edges": json_values, "nodes": json_values,
                                                   "cfg": json_values, "circuits": json_values}))
        p.write_text(json.dumps(doc))
    return str(p)


def commands(w):
    """One strategy per command family: a command line with one or more malformed values."""
    P = paths(w)
    case, scores = w["case"], w["scores"]
    sampled = ["--sampled", "--n-examples", "4"]
    return st.one_of(
        st.tuples(st.just("validate"), P).map(list),
        st.tuples(st.just("validate"), st.just("--schema"), text, P).map(list),
        st.tuples(st.just("validate"), st.just("--case"), P, st.just(scores)).map(list),
        st.tuples(st.just("pull"), weird_names | text).map(list),
        st.tuples(st.just("pull"), st.just("case-3"), st.just("--endpoint"), text).map(list),
        st.tuples(st.just("info"), weird_names, st.sampled_from(["--type", "--json"])).map(
            lambda t: list(t) + (["model"] if t[2] == "--type" else [])),
        st.tuples(st.just("list"), st.just("--hub"), P).map(list),
        st.tuples(st.just("list"), st.just("--type"), text).map(list),
        st.tuples(st.just("discover"), st.just(case), st.just("-m"), methods, st.just("-p"), text).map(
            lambda t: list(t) + sampled),
        st.tuples(st.just("discover"), st.just(case), st.just("-m"), st.just("random"), st.just("--n-examples"),
                  numbers, st.just("--sampled")).map(list),
        st.tuples(st.just("discover"), st.just(case), st.just("-m"), st.just("random"), st.just("--out"), P).map(
            lambda t: list(t) + sampled),
        st.tuples(st.just("discover"), weird_names, st.just("-m"), st.just("random")).map(list),
        st.tuples(st.just("discover"), st.just(case), st.just("-m"), st.just("random"), st.just("--split"),
                  text).map(list),
        st.tuples(st.just("discover"), st.just(case), st.just("-m"), st.just("random"), st.just("--seed"),
                  numbers).map(lambda t: list(t) + ["--sampled"]),
        st.tuples(st.just("ablate"), st.just(case), st.sampled_from(["--nodes", "--edges"]), text).map(
            lambda t: list(t) + sampled),
        st.tuples(st.just("ablate"), st.just(case), st.just("--nodes"), st.just("a0.h0"), st.just("--metric"),
                  text).map(lambda t: list(t) + sampled),
        st.tuples(st.just("score"), st.just(case), P).map(list),
        st.tuples(st.just("score"), st.just(case), st.just(scores), st.sampled_from(["--out", "--plot"]), P).map(
            list),
        st.tuples(st.just("score"), P, st.just(scores)).map(list),
        st.tuples(st.just("evaluate"), P, st.just("--case"), st.just(case)).map(lambda t: list(t) + sampled),
        st.tuples(st.just("evaluate"), st.just(scores), st.just("--case"), st.just(case), st.just("--n-examples"),
                  numbers, st.just("--sampled")).map(list),
        st.tuples(st.just("test-circuit"), st.just(case), P, st.just("--test"), st.just("equivalence")).map(
            lambda t: list(t) + sampled),
        st.tuples(st.just("test-circuit"), st.just(case), st.just("truth"), st.just("--test"), text).map(list),
        st.tuples(st.just("test-circuit"), st.just(case), st.just("truth"), st.just("--test"), st.just("equivalence"),
                  st.sampled_from(["--alpha", "--epsilon", "--n-random"]), numbers).map(lambda t: list(t) + sampled),
        st.tuples(st.just("adversarial"), st.just(case), P).map(lambda t: list(t) + sampled),
        st.tuples(st.just("adversarial"), st.just(case), st.just("truth"),
                  st.sampled_from(["--percentile", "--margin", "--k", "--out"]), numbers | P).map(
            lambda t: list(t) + sampled),
        st.tuples(st.just("import-interpbench"), P, st.just("--case"), text).map(list),
        st.tuples(st.just("import-interpbench"), st.just(w["ib"]), st.just("--case"), st.just("3"), st.just("--out"),
                  P).map(list),
        st.tuples(st.just("publish"), P, st.just("--repo"), text, st.just("--version"), text, st.just("--hub"),
                  st.just(str(w["root"] / "pubhub"))).map(list),
        st.tuples(st.just("publish"), st.just(case), st.just("--repo"), st.just("cbench/case-3"), st.just("--version"),
                  st.just("v1.0.0"), st.just("--hub"), text | P).map(list),
        st.tuples(st.just("hub"), st.just("serve"), st.just("--port"), numbers, st.just("--hub"),
                  st.just(str(w["root"] / "no-hub"))).map(list),
        st.tuples(st.just("hub"), st.just("serve"), st.just("--hub"), P.filter(lambda p: not Path(p).is_dir())).map(
            list),
        st.tuples(st.just("cache"), st.sampled_from(["verify", "nope", ""]), text).map(list),
        st.tuples(st.just("bench"), st.just("--cases"), text, st.just("--methods"), st.just("random"),
                  st.just("--out"), P, st.just("--n-examples"), st.just("2"), st.just("--sampled")).map(list),
        st.tuples(st.just("demo"), st.just("--n-examples"), numbers, st.just("--cases"), text,
                  st.just("--out"), P).map(list),
        st.tuples(st.just("build"), st.just("release"), st.just("--version"), text | numbers, st.just("--zoo"),
                  P).map(list),
        st.tuples(st.just("build"), st.just("siit-report"), st.just("--models"), P, st.just("--out"), P).map(list),
        st.tuples(text, text).map(list),
    )


TIMES: dict = {}


def check_clean(args: list[str], env: dict) -> None:
    import time

    devnull_before = os.stat("/dev/null")
    t0 = time.perf_counter()
    res = run_main(args, env)
    key = " ".join(args[:2]) if args[:1] in (["build"], ["hub"], ["cache"]) else args[0]
    TIMES[key] = TIMES.get(key, 0.0) + time.perf_counter() - t0
    assert res.exception is None, f"cbench {args!r}: exception escaped: {res.exception!r}"
    assert "Traceback" not in res.stderr, f"cbench {args!r}:\n{res.stderr}"
    assert res.code in (0, 1, 2), (args, res.code, res.stderr)
    errors = res.error_lines()
    assert len(errors) <= 1, (args, res.stderr)
    if res.code != 0 and args[:1] not in (["validate"], ["cache"]):
        assert len(errors) == 1, (args, res.code, res.stdout, res.stderr)
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == devnull_before.st_ino, args


def _fuzz_cli(world, n):
    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(st.data())
    def run(data):
        args = data.draw(commands(world))
        check_clean(args, world["env"])

    run()


def _cwd(world, monkeypatch):
    """Relative names the fuzzer makes up (``--out 0``, ``--hub <text>``) land in a scratch directory."""
    cwd = world["root"] / "cwd" / "a" / "b" / "c"
    cwd.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(cwd)


def test_fuzz_every_command_with_malformed_arguments_and_files(world, monkeypatch):
    _cwd(world, monkeypatch)
    _fuzz_cli(world, CLI_EXAMPLES)


@pytest.mark.slow
def test_fuzz_every_command_slow(world, monkeypatch):
    _cwd(world, monkeypatch)
    _fuzz_cli(world, CLI_EXAMPLES * 10)


# ---------------------------------------------------------------------------- pickles
def _fuzz_pickles(n: int, seed: int) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(HERE.parent / "client"),
                                                                             os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(HERE / "fuzz_pickle_worker.py"), str(n), str(seed)],
                          capture_output=True, text=True, env=env, timeout=600 + n / 5)  # generous: a shared CPU
    assert proc.returncode == 0, (f"the unpickler {'crashed (signal ' + str(-proc.returncode) + ')' if proc.returncode < 0 else 'failed'}",
                                  proc.stdout[-2000:], proc.stderr[-2000:])
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith(f"done {n} "), proc.stdout[-500:]
    loaded, refused = int(last.split()[3]), int(last.split()[5])
    assert loaded + refused == n and refused > n // 2 and loaded > 0


def test_fuzz_the_unpickler_with_mutated_pickles():
    _fuzz_pickles(PICKLES, seed=0)


@pytest.mark.slow
def test_fuzz_the_unpickler_slow():
    _fuzz_pickles(PICKLES * 10, seed=1)


def teardown_module(module):
    if os.environ.get("CBENCH_FUZZ_TIMES"):
        print("\nfuzz time per command:", {k: round(v, 2) for k, v in sorted(TIMES.items(), key=lambda kv: -kv[1])})
