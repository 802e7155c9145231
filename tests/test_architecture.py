"""The layout is the architecture (issue 32, docs/architecture.md): packages by concern, imports
running one way, no import circles, no module past 600 lines. These tests are the check that the
map in docs/architecture.md matches the code: a planted back-import or circle fails them."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "client" / "cbench"
BUILDERS = ROOT / "builders" / "cbench_builders"
MAX_LINES = 600
#: modules allowed at the top of the client package: the package itself, its errors, and glue
CLIENT_ROOT_MODULES = {"__init__.py", "errors.py"}
#: modules allowed at the top of the builders package: the package itself and its CLI glue
BUILDERS_ROOT_MODULES = {"__init__.py", "cli.py"}


def lint_imports(config: Path, search_path: Path) -> tuple[int, str]:
    """Run import-linter's contracts in ``config`` with ``search_path`` first on sys.path."""
    import subprocess

    code = ("import sys; sys.path.insert(0, sys.argv[1]); from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[2], no_cache=True))")
    proc = subprocess.run([sys.executable, "-c", code, str(search_path), str(config)],
                          capture_output=True, text=True, cwd=search_path, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


_CIRCLES = """
import json, sys
sys.path.insert(0, sys.argv[1])
sys.setrecursionlimit(10000)
import grimp
graph = grimp.build_graph(*sys.argv[2:], include_external_packages=False, cache_dir=None)
index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]
def visit(v):  # Tarjan's strongly connected components
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on_stack.add(v)
    for w in sorted(graph.find_modules_directly_imported_by(v)):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on_stack.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            circles.append(sorted(comp))
for m in sorted(graph.modules):
    if m not in index:
        visit(m)
print(json.dumps(circles))
"""


def import_circles(*packages: str, search_path: Path | None = None) -> list[list[str]]:
    """Every set of modules that import one another in a circle (strongly connected components
    of grimp's module graph, function-level and TYPE_CHECKING imports included). Runs in a fresh
    interpreter so that ``search_path`` (a planted copy) is what gets analysed."""
    import json
    import subprocess

    where = search_path if search_path is not None else ROOT / "client"
    proc = subprocess.run([sys.executable, "-c", _CIRCLES, str(where), *packages], capture_output=True,
                          text=True, cwd=where, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _copy_client(tmp_path: Path) -> Path:
    """A copy of the client package (schemas resolved) and the contract, to plant faults in."""
    dst = tmp_path / "src"
    shutil.copytree(CLIENT, dst / "cbench", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "examples", "*.json", "static", "templates"))
    text = (ROOT / "pyproject.toml").read_text()
    contracts = text[text.index("[tool.importlinter]"):]
    contracts = re.sub(r'root_packages = \[[^\]]*\]', 'root_packages = ["cbench"]', contracts)
    contracts = contracts[:contracts.index('[[tool.importlinter.contracts]]\nid = "client-never-imports-builders"')]
    (dst / "pyproject.toml").write_text(contracts)
    return dst


def test_import_contracts_hold():
    rc, out = lint_imports(ROOT / "pyproject.toml", ROOT / "client")
    assert rc == 0, out
    assert "0 broken" in out and "KEPT" in out, out


def test_a_planted_back_import_breaks_the_contract(tmp_path):
    src = _copy_client(tmp_path)
    rc, out = lint_imports(src / "pyproject.toml", src)
    assert rc == 0, out  # the copy holds as the original does
    target = src / "cbench" / "hub" / "cache.py"  # the hub reaching up into discovery
    target.write_text(target.read_text() + "\n\ndef _planted():\n    from cbench.discovery import eap  # noqa\n")
    rc, out = lint_imports(src / "pyproject.toml", src)
    assert rc != 0
    assert "cbench.hub is not allowed to import cbench.discovery" in out, out


def test_a_new_package_must_be_placed_in_a_layer(tmp_path):
    src = _copy_client(tmp_path)
    (src / "cbench" / "stray").mkdir()
    (src / "cbench" / "stray" / "__init__.py").write_text("")
    rc, out = lint_imports(src / "pyproject.toml", src)
    assert rc != 0 and "cbench.stray" in out, out


def test_no_import_circles():
    assert import_circles("cbench", "cbench_builders") == []


def test_a_planted_circle_is_found(tmp_path):
    src = _copy_client(tmp_path)
    assert import_circles("cbench", search_path=src) == []
    target = src / "cbench" / "runtime" / "layers.py"  # a pass module importing the facade back
    target.write_text(target.read_text() + "\n\ndef _planted():\n    from cbench.runtime.circuit_runtime import "
                      "CircuitRuntime  # noqa\n")
    circles = import_circles("cbench", search_path=src)
    assert any("cbench.runtime.layers" in c and "cbench.runtime.circuit_runtime" in c for c in circles), circles


@pytest.mark.parametrize("package,allowed", [(CLIENT, CLIENT_ROOT_MODULES), (BUILDERS, BUILDERS_ROOT_MODULES)])
def test_modules_live_in_packages_by_concern(package, allowed):
    loose = sorted(p.name for p in package.glob("*.py") if p.name not in allowed)
    assert loose == [], f"modules outside a subpackage of {package.name}: {loose}"
    for sub in package.iterdir():
        if sub.is_dir() and sub.name != "__pycache__" and any(sub.glob("*.py")):
            init = sub / "__init__.py"
            assert init.is_file(), f"{sub} has modules but no __init__.py"
            doc = init.read_text().lstrip()
            assert doc.startswith('"""') and len(doc.split('"""')[1].strip()) > 40, \
                f"{init} must say what the package owns"


def test_no_module_above_600_lines():
    long = []
    for package in (CLIENT, BUILDERS, ROOT / "schemas"):
        for path in package.rglob("*.py"):
            n = len(path.read_text().splitlines())
            if n > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n}")
    assert long == [], long


def test_architecture_doc_names_every_package():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for sub in sorted(p.name for p in CLIENT.iterdir() if (p / "__init__.py").is_file()):
        assert f"`{sub}/`" in doc, f"docs/architecture.md does not describe cbench/{sub}/"
    for sub in sorted(p.name for p in BUILDERS.iterdir() if (p / "__init__.py").is_file()):
        assert f"`{sub}/`" in doc, f"docs/architecture.md does not describe cbench_builders/{sub}/"
    text = (ROOT / "pyproject.toml").read_text()
    layers = re.search(r'id = "client-layers".*?layers = \[(.*?)\]', text, re.S)[1]
    for line in re.findall(r'"([^"]+)"', layers):
        assert line in doc, f"docs/architecture.md's layer diagram lacks the layer {line!r}"


def test_old_module_paths_still_import_with_a_warning():
    import importlib
    import warnings

    import cbench

    for old, new in cbench.MOVED_MODULES.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert module.__spec__.name == new
        assert any(issubclass(w.category, DeprecationWarning) and old in str(w.message) for w in caught), old
        sys.modules.pop(old, None)
