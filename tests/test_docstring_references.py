"""Every name a docstring of the client points at exists: dotted ``cbench.xxx`` names, and
backticked ``module.attribute`` references whose first part is a module of cbench. A docstring
that sends a reader to a function that was renamed or never existed fails here."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "client" / "cbench"
DOTTED = re.compile(r"(?<![\w/.-])cbench(?:\.[A-Za-z_]\w*)+")
TICKED = re.compile(r"`+(?::[a-z]+:`)?~?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
#: names in docstrings that are not Python objects: entry-point groups
NOT_OBJECTS = {"cbench.commands", "cbench.methods"}
#: module basenames that are also the usual names of variables (``data.base``, ``graph.edges``)
VARIABLE_NAMES = {"data", "graph", "model", "results", "sandbox", "report", "masks", "tokenizer"}
FILE_SUFFIXES = {"json", "py", "js", "md", "txt", "pkl", "pth", "csv", "png", "html", "j2", "parquet"}


def _module_file(module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for path in (ROOT / rel / "__init__.py", (ROOT / rel).with_suffix(".py")):
        if path.is_file():
            return path
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _top_level(tree: ast.Module) -> dict[str, ast.AST | str]:
    """Names a module defines: its functions, classes and assignments, its ``__all__`` and its
    imports (``from x import y`` as the dotted name ``x.y``)."""
    out: dict[str, ast.AST | str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
                        if n.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                            out.update({e.value: node for e in node.value.elts if isinstance(e, ast.Constant)})
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            out.update({(a.asname or a.name).split(".")[0]: a.name for a in node.names if a.asname})
    lazy = "__getattr__" in out or any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_lazy"
                                       for n in ast.walk(tree))
    if lazy:  # names exported on first use: listed in the module's tuples and dicts of names
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for n in ast.walk(node.value):
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
                        out.setdefault(n.value, node)
    return out


def _static(name: str, depth: int = 0) -> bool:
    """``name`` found in cbench's sources without importing anything (None: cannot tell)."""
    parts = name.split(".")
    if parts[0] != "cbench" or depth > 5:
        return False
    for i in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:i]))
        if path is None:
            continue
        rest = parts[i:]
        if not rest:
            return True
        found = _top_level(_tree(path)).get(rest[0])
        if found is None:
            return False
        if isinstance(found, str):  # imported from elsewhere: look there
            return _static(".".join([found, *rest[1:]]), depth + 1)
        if len(rest) == 1:
            return True
        if isinstance(found, ast.ClassDef) and len(rest) == 2:
            source = ast.unparse(found)
            return any(getattr(n, "name", None) == rest[1] for n in found.body) or re.search(
                rf"(^|\n)\s*{rest[1]}\s*[:=]|self\.{rest[1]}\b", source) is not None
        return False
    return False


def _imported(name: str) -> bool:
    """``name`` reached by importing its longest importable module prefix and getting attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def resolves(name: str) -> bool:
    """Whether the dotted ``name`` exists: read from the sources where they say (fast, nothing
    imported), else imported (names a package exports on first use, inherited attributes)."""
    return _static(name) or _imported(name)


def _modules() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.setdefault(parts[-1], []).append(".".join(parts))
    return out


def _docstrings():
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield path.relative_to(ROOT).as_posix(), doc


def unresolved_references() -> list[tuple[str, str]]:
    modules = _modules()
    bad = []
    for where, doc in _docstrings():
        for m in DOTTED.finditer(doc):
            name = m.group(0)
            if name not in NOT_OBJECTS and name.split(".")[-1] not in FILE_SUFFIXES and not resolves(name):
                bad.append((where, name))
        for m in TICKED.finditer(doc):
            name = m.group(1)
            head, last = name.split(".")[0], name.split(".")[-1]
            if head == "cbench" or head in VARIABLE_NAMES or last in FILE_SUFFIXES or head not in modules:
                continue
            if not any(resolves(full + name[len(head):]) for full in modules[head]):
                bad.append((where, name))
    return sorted(set(bad))


def test_every_docstring_reference_resolves():
    assert unresolved_references() == []


def test_the_check_finds_names_that_do_not_exist(monkeypatch):
    """The two kinds of broken reference the check exists for are caught, real ones are not."""
    assert not resolves("cbench.hub_client.load") and not _static("cbench.scoring.ground_truth.score_edge_scores")
    assert _static("cbench.scoring.ground_truth.score_against_truth") and resolves("cbench.discover")
    assert _static("cbench.graph.graph.Graph.forward_nodes")  # an instance attribute
    doc = '"""See :func:`cbench.hub_client.load` and ``registry.find_method``, not ``registry.method_spec``."""\n'
    monkeypatch.setitem(globals(), "_docstrings", lambda: iter([("planted.py", ast.get_docstring(ast.parse(doc)))]))
    assert unresolved_references() == [("planted.py", "cbench.hub_client.load"), ("planted.py", "registry.find_method")]
