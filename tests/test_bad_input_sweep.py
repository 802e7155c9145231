"""Every ``cbench`` command against a few kinds of bad arguments (issue 33 item 6): a non-zero exit
(or its help), at most one ``error:`` line, no traceback, and the current directory unchanged.

The commands are enumerated from :mod:`cbench.cli` (but ``build``, the builders' commands);
each is run in-process, in a fresh temporary current directory with its own
``CBENCH_HOME``, so nothing is pulled or seeded from the network."""

from __future__ import annotations

import os

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cbench.cli import cli
from cli_inprocess import run_main


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
            out += [[opt, ""], [opt, "in.json"], [opt, "no/such/dir"]]
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
