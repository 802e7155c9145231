"""Help and listing do not import torch (issue 49): every ``--help`` (every command and
subcommand, read from the click tree, so a new command is covered), ``cbench list`` and
``cbench info`` of a pulled case.

Importing torch costs 2-6 s on a shared 2-core machine; without it help answers in 0.1-0.3 s
(benchmarks/bench_help.py measures that; timing is not asserted here). Each check runs in a fresh
Python process, because this one has imported torch long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Walks the command tree and runs `cbench PATH --help` through the real entry point, in this one
# process, noting after each which of the heavy modules it brought in; prints a JSON list of
# [path, [heavy modules]] in walking order. PLANT is code run first (a test plants an import).
_WALK = r"""
import io, json, sys, contextlib
import click
PLANT
from cbench.cli import cli, main

HEAVY = ("torch", "transformer_lens", "datasets", "matplotlib")

def walk(cmd, path, ctx):
    yield path
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, path + [name], click.Context(sub, info_name=name, parent=ctx))

out = []
for path in list(walk(cli, [], click.Context(cli, info_name="cbench"))):
    buf = io.StringIO()
    code = None
    with contextlib.redirect_stdout(buf):
        try:
            main(path + ["--help"])
        except SystemExit as exc:
            code = exc.code
    heavy = [m for m in HEAVY if m in sys.modules]
    out.append([path, heavy, code, len(buf.getvalue())])
print(json.dumps(out))
"""


def _walk(plant: str = "") -> list:
    proc = subprocess.run([sys.executable, "-c", _WALK.replace("PLANT", plant)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_help_imports_torch():
    rows = _walk()
    paths = [" ".join(p) for p, *_ in rows]
    # the walk reaches the groups' subcommands: find's, build's, hub's and cache's
    for expected in ("", "discover", "bench", "find call", "build siit", "build datasets", "build stress",
                     "hub serve", "cache verify", "list", "info"):
        assert expected in paths, (expected, paths)
    assert len(rows) >= 40
    heavy = [(" ".join(p), h) for p, h, _code, _n in rows if h]
    assert heavy == [], f"help paths that import heavy modules (the first one is the culprit): {heavy[:3]}"
    for p, _h, code, n in rows:
        assert code in (0, None) and n > 100, (p, code, n)  # a real help text, exit 0


def test_the_walk_catches_a_help_path_that_imports_torch():
    """The check fails when a help path imports torch: plant one (the metric choice of discover,
    evaluate, ... importing the torch metrics module) and the walk names those commands."""
    plant = ("import cbench.cli.choices as _c\n"
             "def _m():\n    from cbench.tasks.metrics import METRICS\n    return METRICS\n"
             "_c.METRIC_CHOICE._load = _m\n")
    rows = _walk(plant)
    first = next(i for i, (_p, h, _c, _n) in enumerate(rows) if "torch" in h)
    # the first command in the walk with a --metric option (ablate today); every path before it is clean
    assert " ".join(rows[first][0]) in ("ablate", "adversarial", "discover", "evaluate", "score", "test-circuit")
    assert rows[0][0] == [] and not any(h for _p, h, _c, _n in rows[:first])


def _run(args, home: Path, plant: str = ""):
    code = (plant + "import sys\nfrom cbench.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "print('HEAVY=' + ','.join(m for m in ('torch', 'transformer_lens', 'datasets') if m in sys.modules), "
            "file=sys.stderr)\nsys.exit(code)\n")
    env = dict(os.environ, CBENCH_HOME=str(home))
    env.pop("CBENCH_HUB", None), env.pop("CBENCH_ENDPOINT", None), env.pop("HF_ENDPOINT", None)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def pulled_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    res = _run(["pull", "case-3"], home)
    assert res.returncode == 0, res.stderr[-2000:]
    return home


def test_list_and_info_do_not_import_torch(pulled_home):
    res = _run(["list"], pulled_home)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "case-3" in res.stdout.split() and res.stderr.strip().splitlines()[-1] == "HEAVY=", res.stderr[-500:]
    res = _run(["info", "case-3"], pulled_home)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("cbench/case-3 ") and "circuit:" in res.stdout
    assert res.stderr.strip().splitlines()[-1] == "HEAVY=", res.stderr[-500:]
    res = _run(["info", "case-3", "--json"], pulled_home)
    assert json.loads(res.stdout)["case"] == "3" and res.stderr.strip().splitlines()[-1] == "HEAVY="
    # the check can fail: with torch imported on the way, the same `info` is caught
    res = _run(["info", "case-3"], pulled_home, plant="import torch\n")
    assert res.returncode == 0 and res.stderr.strip().splitlines()[-1] == "HEAVY=torch", res.stderr[-500:]
