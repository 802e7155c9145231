"""Every ``cbench`` command, and every call of the Python API, against bad input (issues 33, 44 and
51): a non-zero exit (or its help), at most one ``error:`` line, no traceback, nothing written.

What is swept, enumerated from the click tree and from the API's signatures (so a new command,
option or keyword argument is covered without editing this file):

* every numeric option of every command, ``cbench build`` included: its type has two finite
  bounds, and ``0``, ``-1``, ``nan``, ``inf``, ``1e300``, ``10**20`` and ``abc`` are each either
  in range or refused at parse time with one line naming the option, exit 2, nothing written;
* every output option (``--out``, ``--html``, ``--plot``, a build's output directories): ``/proc``
  (not writable), a character device and a missing parent are refused the same way before any work;
* every command (but ``build``) with an unknown option, empty values, directories where files are
  expected and missing files (:func:`test_bad_arguments_give_one_clean_error`), and random argument
  lists (hypothesis);
* every numeric, flag and seed keyword of the API's calls (``register_method`` too) with NaN, infinities, negative and huge
  numbers and wrong types: a ``UsageError`` naming the keyword, raised before any output exists.

The commands are run in-process (:mod:`cli_inprocess`), each in a fresh temporary current directory
with its own ``CBENCH_HOME``, so nothing is pulled or seeded from the network."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbench.cli import cli
from cbench.cli.options import FiniteFloatRange
from cli_inprocess import assert_one_clean_error, run_main

CASE_DIR = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench" / "case-3" / "v1.0.0"


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        try:
            cmd = group.get_command(ctx, name)
        except click.UsageError:  # a plugin command whose dependencies are missing
            continue
        if cmd is None or cmd.hidden:
            continue
        if isinstance(cmd, click.Group):
            out += _leaves(cmd, prefix + (name,))
        else:
            out.append((prefix + (name,), cmd))
    return out


# `cbench build` (the builders, from the cbench.commands entry point) is left out: its commands train
# and write release artifacts, minutes each, and have their own tests
COMMANDS = [(p, c) for p, c in _leaves(cli) if p[0] != "build"]
SLOW = {("demo",), ("hub", "serve")}  # long-running by design: not run here


def _bad_args(cmd: click.Command) -> list[list[str]]:
    """A few bad argument lists for ``cmd``: an unknown option, then per option an empty value,
    a directory or a missing file where a file is expected, and NaN/inf/negative numbers."""
    out = [["--no-such-option"]]
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.is_flag or p.count or not p.opts[0].startswith("--"):
            continue
        if p.name in ("help", "version"):
            continue
        opt = p.opts[0]
        if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType)):
            out += [[opt, v] for v in ("nan", "inf", "-1", "-1e309", "99999999999999999999999")]
        elif isinstance(p.type, click.Path) and not p.type.file_okay:  # a directory: "." is a fair answer
            # (a missing parent may be fine: bench --out and report --html create theirs; under a file never is)
            out += [[opt, ""], [opt, "in.json"], [opt, "in.json/no/such/dir"]]
        elif isinstance(p.type, click.Path):  # a file: a directory is wrong
            out += [[opt, ""], [opt, "."], [opt, "no/such/file.json"]]
        else:  # text: empty, or a name of nothing
            out += [[opt, ""], [opt, "no/such/file.json"]]
    return out


CASES = [(path, args) for path, cmd in COMMANDS if path not in SLOW for args in _bad_args(cmd)]


def _check(res, cwd, before, must_fail: bool = True):
    assert res.exception is None, f"exception escaped: {res.exception!r}"
    assert "Traceback" not in res.stderr, res.stderr
    assert len(res.error_lines()) <= 1, res.stderr
    if res.code == 0 and must_fail:  # only help may succeed on bad input
        assert "Usage:" in res.stdout or "Usage:" in res.stderr, (res.stdout, res.stderr)
    assert sorted(os.listdir(cwd)) == before, sorted(os.listdir(cwd))


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "in.json").write_text("{}")
    monkeypatch.chdir(cwd)
    env = {"CBENCH_HOME": str(tmp_path / "home"), "CBENCH_HUB": str(tmp_path / "no-hub"), "CBENCH_ENDPOINT": None,
           "HF_HUB_OFFLINE": "1", "CBENCH_THREADS": "1"}
    return cwd, env


def test_every_command_is_enumerated():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"score", "export", "report", "bench", "localize", "discover", "cache verify", "find score"} <= names


@pytest.mark.parametrize("path, args", CASES, ids=[" ".join(p) + " " + " ".join(a) for p, a in CASES])
def test_bad_arguments_give_one_clean_error(sandbox, path, args):
    cwd, env = sandbox
    before = sorted(os.listdir(cwd))
    # positional arguments: a missing file for the first, an existing file for the rest
    cmd = dict(COMMANDS)[path]
    positional = [p for p in cmd.params if isinstance(p, click.Argument)]
    pos = ["no-such-case" if i == 0 else "in.json" for i, p in enumerate(positional) if p.required]
    res = run_main([*path, *pos, *args], env=env)
    _check(res, cwd, before)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([(p, c) for p, c in COMMANDS if p not in SLOW]),
       st.lists(st.sampled_from(["", ".", "-", "--", "nan", "inf", "-1", "in.json", "no/such", "--out", "--json",
                                 "\u00e9", "a" * 300, "--seed", "0"]), max_size=4))
def test_random_bad_arguments_never_give_a_traceback(sandbox, command, extra):
    cwd, env = sandbox
    before = sorted(os.listdir(cwd))
    path, _ = command
    res = run_main([*path, *extra], env=env)
    _check(res, cwd, before, must_fail=False)  # a random list may be a fair one (`cache verify`)


# ---------------------------------------------------------------------------- every numeric option (issue 44 item 5, 51)
ALL_COMMANDS = _leaves(cli)  # `cbench build` included: a bad number is refused before any build starts
BAD_NUMBERS = ("0", "-1", "nan", "inf", "1e300", str(10**20), "abc")


def _numeric_options() -> list[tuple[tuple[str, ...], click.Option]]:
    out = []
    for path, cmd in ALL_COMMANDS:
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and not p.count and isinstance(
                    p.type, (click.types.IntParamType, click.types.FloatParamType)):
                out.append((path, p))
    return out


NUMERIC = _numeric_options()


def _accepts(param: click.Option, value: str) -> bool:
    try:
        param.type.convert(value, param, None)
        return True
    except click.BadParameter:
        return False


def test_the_sweep_sees_every_command_and_its_numbers():
    names = {" ".join(p) for p, _ in ALL_COMMANDS}
    assert {"build ioi-model", "build find", "build re-release", "bench", "localize", "find score"} <= names
    opts = {(" ".join(p), o.opts[0]) for p, o in NUMERIC}
    assert {("build ioi-model", "--target"), ("build ioi-model", "--verify-pairs"), ("build ioi-model", "--edge-weight"),
            ("build ioi-model", "--iit-weight"), ("bench", "--n-examples"), ("find score", "--wall-s")} <= opts
    assert len(NUMERIC) > 60


@pytest.mark.parametrize("path, param", NUMERIC, ids=[" ".join(p) + " " + o.opts[0] for p, o in NUMERIC])
def test_every_numeric_option_has_two_finite_bounds(path, param):
    t = param.type
    assert isinstance(t, (click.IntRange, click.FloatRange)), f"{type(t).__name__}: use cbench.cli.options.counts/floats"
    assert t.min is not None and t.max is not None, "both bounds (cbench.cli.options.counts/floats)"
    if isinstance(t, click.FloatRange):
        assert isinstance(t, FiniteFloatRange), "floats must refuse nan and inf (cbench.cli.options.floats)"
    for v in ("-1", "nan", "inf", "-inf", "1e300", str(10**20), "abc", ""):
        assert not _accepts(param, v), v


NUMERIC_RUNS = [(path, param.opts[0], v) for path, param in NUMERIC for v in BAD_NUMBERS if not _accepts(param, v)]


def test_numeric_runs_cover_every_option_with_the_issue_values():
    assert {(p, o) for p, o, _ in NUMERIC_RUNS} == {(p, o.opts[0]) for p, o in NUMERIC}
    assert {v for _, _, v in NUMERIC_RUNS} == set(BAD_NUMBERS)


@pytest.mark.parametrize("path, opt, value", NUMERIC_RUNS, ids=[" ".join(p) + f" {o} {v}" for p, o, v in NUMERIC_RUNS])
def test_a_bad_number_is_one_line_before_any_work(sandbox, tmp_path, path, opt, value):
    cwd, env = sandbox
    before = sorted(os.listdir(cwd))
    # the option first: click checks the values given in command-line order, before missing arguments
    res = run_main([*path, opt, value], env=env)
    assert_one_clean_error(res, 2, opt)
    assert sorted(os.listdir(cwd)) == before
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.json"))


# ---------------------------------------------------------------------------- every output option
OUTPUT_NAMES = {"out", "out_dir", "html", "plot", "failed_dir", "checkpoint_dir"}
OUTPUTS = [(path, p.opts[0]) for path, cmd in ALL_COMMANDS for p in cmd.params
           if isinstance(p, click.Option) and p.name in OUTPUT_NAMES]
BAD_OUTPUTS = ("/proc/nope", "/proc/nope/deeper/x", "/dev/null")
OUTPUT_RUNS = [(path, opt, v) for path, opt in OUTPUTS for v in BAD_OUTPUTS]


def test_the_sweep_sees_every_output():
    outs = {(" ".join(p), o) for p, o in OUTPUTS}
    assert {("build find", "--out"), ("build ioi-model", "--out"), ("bench", "--out"), ("report", "--html"),
            ("score", "--plot"), ("build siit", "--checkpoint-dir"), ("import-interpbench", "--out")} <= outs


@pytest.mark.parametrize("path, opt, value", OUTPUT_RUNS, ids=[" ".join(p) + f" {o} {v}" for p, o, v in OUTPUT_RUNS])
def test_an_unwritable_output_is_one_line_before_any_work(sandbox, path, opt, value):
    cwd, env = sandbox
    before = sorted(os.listdir(cwd))
    res = run_main([*path, opt, value], env=env)
    assert_one_clean_error(res, 2, opt)
    assert sorted(os.listdir(cwd)) == before


# ---------------------------------------------------------------------------- the Python API
import inspect  # noqa: E402

import cbench  # noqa: E402
from cbench.errors import UsageError  # noqa: E402

API_CALLS = ("pull", "discover", "score", "evaluate", "bench", "verify", "register_method")
BAD_INTS = (float("nan"), float("inf"), -1, 10**20, 1e300, 2.0, "3", True, None)
BAD_FLAGS = ("yes", 1, 0, None, float("nan"))


def _api_cases() -> list[tuple[str, str, object]]:
    out = []
    for name in API_CALLS:
        for kw, prm in inspect.signature(getattr(cbench, name)).parameters.items():
            ann = str(prm.annotation)
            if ann == "bool":
                out += [(name, kw, v) for v in BAD_FLAGS]
            elif ann == "bool | None":
                out += [(name, kw, v) for v in BAD_FLAGS if v is not None]
            elif ann in ("int", "int | None", "float", "float | None"):
                out += [(name, kw, v) for v in BAD_INTS if not (v is None and "None" in ann)]
    return out


API_CASES = _api_cases()


def test_the_api_sweep_sees_every_number_and_flag():
    seen = {(n, k) for n, k, _ in API_CASES}
    assert {("bench", "n_examples"), ("bench", "seed"), ("bench", "sampled"), ("discover", "n_examples"),
            ("score", "seed"), ("evaluate", "n_examples"), ("verify", "n_pairs"), ("pull", "accept_moved_tag"),
            ("register_method", "replace")} <= seen


def _api_args(name: str, out) -> tuple[list, dict]:
    case = str(CASE_DIR)
    return {"pull": (["case-3"], {}), "discover": ([case, "random"], {}), "score": ([case, {}], {}),
            "evaluate": ([{}, case], {}), "bench": (["3", "random"], {"out": str(out)}),
            "verify": ([case], {}), "register_method": (["sweep-method", lambda ctx: {}], {})}[name]


@pytest.mark.parametrize("name, kw, value", API_CASES, ids=[f"{n} {k}={v!r}" for n, k, v in API_CASES])
def test_the_api_refuses_bad_numbers_and_flags_before_any_output(sandbox, tmp_path, monkeypatch, name, kw, value):
    cwd, env = sandbox
    for k, v in env.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    before = sorted(os.listdir(cwd))
    args, kwargs = _api_args(name, tmp_path / "results")
    try:
        with pytest.raises(UsageError, match=kw):
            getattr(cbench, name)(*args, **kwargs, **{kw: value})
    finally:
        if name == "register_method" and "sweep-method" in cbench.methods():
            cbench.unregister_method("sweep-method")
    assert not (tmp_path / "results").exists()
    assert sorted(os.listdir(cwd)) == before


# ---------------------------------------------------------------------------- damaged files
DAMAGE = {"empty": b"", "garbage": b"\x00\xff\xfe not a document \x89PNG", "truncated": b'{"schema": "cbench/edge-',
          "wrong shape": b"[1, 2, 3]", "deep": b"[" * 100_000}
#: the files a directory argument is read for (artifacts, InterpBench folders, results directories)
DIR_FILES = ("meta.json", "config.json", "model.safetensors", "results.json", "ll_model.pth", "ll_model_cfg.pkl",
             "edges.pkl", "circuit.json", "site.json", "numeric/test-00000-of-00001.parquet",
             "numeric/mlp.safetensors", "strings/test-00000-of-00001.parquet",
             "case-3/train-00000-of-00001.parquet", "case-3/test-00000-of-00001.parquet")
FILE_ARGS = {"circuit", "submission", "scores", "file", "submissions", "files"}
DIR_ARGS = {"directory", "results"}


def _damaged_args(cmd: click.Command) -> list[str] | None:
    """Positional arguments for ``cmd``: a real case for a case, the damaged file for a file, a
    directory of damaged files for a directory; None when the command reads no file it is given."""
    args, reads = [], False
    for p in cmd.params:
        if not isinstance(p, click.Argument):
            continue
        if p.name == "case":
            args.append(str(CASE_DIR))
        elif p.name in FILE_ARGS:
            args.append("damaged.json")
            reads = True
        elif p.name in DIR_ARGS:
            args.append("damaged-dir")
            reads = True
        elif p.required:
            args.append("x")
    return args if reads else None


DAMAGED_RUNS = [(path, kind) for path, cmd in COMMANDS if path not in SLOW and _damaged_args(cmd) is not None
                for kind in DAMAGE]


def test_the_damaged_file_sweep_sees_every_reader():
    seen = {" ".join(p) for p, _ in DAMAGED_RUNS}
    assert {"score", "evaluate", "export", "adversarial", "test-circuit", "find score", "submit", "validate",
            "report", "publish", "import-interpbench"} <= seen


@pytest.mark.parametrize("path, kind", DAMAGED_RUNS, ids=[" ".join(p) + f" {k}" for p, k in DAMAGED_RUNS])
def test_a_damaged_file_is_one_line_and_nothing_written(sandbox, path, kind):
    cwd, env = sandbox
    (cwd / "damaged.json").write_bytes(DAMAGE[kind])
    (cwd / "damaged-dir").mkdir()
    for name in DIR_FILES:
        (cwd / "damaged-dir" / name).parent.mkdir(exist_ok=True)
        (cwd / "damaged-dir" / name).write_bytes(DAMAGE[kind])
    before = sorted(os.listdir(cwd))
    res = run_main([*path, *_damaged_args(dict(COMMANDS)[path])], env=env)
    _check(res, cwd, before)
    assert res.code != 0, (res.stdout, res.stderr)
    # one error line; `cbench validate` reports per file on standard output ("FILE: error: ...")
    assert len(res.error_lines()) == 1 or (path == ("validate",) and ": error: " in res.stdout), (res.stdout,
                                                                                                  res.stderr)


def _positionals(cmd: click.Command) -> list[str]:
    out = []
    for p in cmd.params:
        if isinstance(p, click.Argument) and p.required:
            out.append(str(CASE_DIR) if p.name == "case" else "damaged.json" if p.name in FILE_ARGS
                       else "damaged-dir" if p.name in DIR_ARGS else "x")
    return out


#: every input option that names a file or directory, with a damaged file and a directory of them
DAMAGED_OPTION_RUNS = [(path, p.opts[0], value, kind) for path, cmd in COMMANDS if path not in SLOW
                       for p in cmd.params
                       if isinstance(p, click.Option) and isinstance(p.type, click.Path) and p.name not in OUTPUT_NAMES
                       for value in (("damaged.json", "damaged-dir") if p.type.file_okay else ("damaged-dir",))
                       for kind in ("garbage", "truncated")]


def test_the_damaged_option_sweep_sees_every_input_option():
    seen = {(" ".join(p), o) for p, o, _, _ in DAMAGED_OPTION_RUNS}
    assert {("localize", "--dataset"), ("report", "--variables"), ("find score", "--suite")} <= seen


@pytest.mark.parametrize("path, opt, value, kind", DAMAGED_OPTION_RUNS,
                         ids=[" ".join(p) + f" {o} {v} {k}" for p, o, v, k in DAMAGED_OPTION_RUNS])
def test_a_damaged_input_option_is_one_line_and_nothing_written(sandbox, path, opt, value, kind):
    cwd, env = sandbox
    (cwd / "damaged.json").write_bytes(DAMAGE[kind])
    for name in DIR_FILES:
        (cwd / "damaged-dir" / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / "damaged-dir" / name).write_bytes(DAMAGE[kind])
    before = sorted(os.listdir(cwd))
    extra = {("localize",): ["--variable", "is_x_2"], ("find", "call"): ["--", "1"],
             ("submit",): [] if opt == "--report" else ["--report", "damaged-dir"]}.get(path, [])
    res = run_main([*path, *_positionals(dict(COMMANDS)[path]), opt, value, *extra], env=env)
    _check(res, cwd, before)
    assert res.code != 0 and len(res.error_lines()) == 1, (res.stdout, res.stderr)
    # a damaged input is what is reported (this one, or a damaged argument read before it; report checks
    # its RESULTS argument, a missing directory, first)
    assert "damaged" in res.error_lines()[0] or path == ("report",), res.stderr
