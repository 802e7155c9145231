"""Case specifications: the modules in ``model_zoo/cases/`` that define each benchmark task.

A case spec is a plain Python module ``model_zoo/cases/case_<id zero-padded to 3>.py`` (it does
not import cbench_builders) with a docstring, a ``SPEC`` dict (a ``cbench/case/v1`` document:
id, description, task type, vocab, sequence lengths, BOS/PAD, causal flag, label positions,
source, seed, SIIT training hyperparameters, optional notes) and ``def program()`` returning the
RASP program (it imports tracr inside). ``model_zoo/README.md`` describes the format.

This module finds the zoo (``$CBENCH_ZOO`` or ``model_zoo/`` of the repository), loads a case
module by path, checks its SPEC against the case schema and hands back a :class:`CaseSpec`.
Every problem is one :class:`~cbench.errors.BuildError` that names the case.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from cbench.errors import BuildError, CbenchError, did_you_mean

#: The 16 cases the InterpBench paper evaluates (section 4, appendix G).
MAIN_CASES: tuple[str, ...] = ("3", "4", "8", "11", "13", "18", "19", "20", "21", "26", "29", "33", "34",
                               "35", "36", "37")

_CASE_FILE_RE = re.compile(r"^case_(\d{3,})\.py$")
# The binding spec format spells "every position after BOS" as "all-but-bos"; the case schema
# (schemas/case.schema.json) spells the same thing "all". Both are accepted; CaseSpec keeps
# what the file says.
_LABEL_POSITION_ALIASES = {"all-but-bos": "all"}
_RASP_IDS_LOCK = threading.Lock()


def zoo_dir() -> Path:
    """The model zoo: ``$CBENCH_ZOO`` when set, else ``model_zoo/`` at the repository root."""
    env = os.environ.get("CBENCH_ZOO")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[3] / "model_zoo"  # cbench_builders/cases/specs.py -> the repository


def cases_dir() -> Path:
    return zoo_dir() / "cases"


def normalize_case_id(case_id: Any) -> str:
    """``3``, ``"3"``, ``"003"``, ``"case-3"`` and ``"case_003"`` all name case ``"3"``."""
    text = str(case_id).strip()
    for prefix in ("case-", "case_", "tracr-case-"):
        if text.lower().startswith(prefix):
            text = text[len(prefix):]
            break
    if text.isdigit():
        text = str(int(text))
    return text


def _case_file(case_id: str) -> Path:
    return cases_dir() / (f"case_{int(case_id):03d}.py" if case_id.isdigit() else f"case_{case_id}.py")


def list_cases() -> list[str]:
    """Ids of every case in the zoo, in numeric order."""
    d = cases_dir()
    if not d.is_dir():
        return []
    ids = [str(int(m[1])) for p in d.iterdir() if (m := _CASE_FILE_RE.match(p.name))]
    return sorted(ids, key=int)


@dataclass(frozen=True)
class CaseSpec:
    """One case of the zoo: its SPEC fields and its RASP program."""

    id: str
    description: str
    task_type: str  # "categorical" | "numerical"
    vocab: tuple
    min_seq_len: int  # without BOS
    max_seq_len: int  # without BOS (tracr's compile max_seq_len)
    bos: str
    pad: str | None
    causal: bool
    label_positions: Any
    source: str  # "original" | "cbench"
    seed: int
    training: dict
    notes: str | None
    path: Path
    spec: dict = field(repr=False, compare=False)
    module: ModuleType = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return f"case-{self.id}"

    @property
    def docstring(self) -> str:
        return inspect.getdoc(self.module) or ""

    def program(self):
        """A fresh RASP program. Tracr labels unnamed operations with a global counter, so the
        counter is reset first: the same case always gets the same labels."""
        from tracr.rasp import rasp

        with _RASP_IDS_LOCK:
            rasp.RASPExpr._ids = itertools.count(1)
            try:
                prog = self.module.program()
            except CbenchError:
                raise
            except Exception as exc:  # the spec's own code failed
                raise BuildError(f"case {self.id}: program() in {self.path.name} raised "
                                 f"{type(exc).__name__}: {exc}") from None
            # labels are assigned lazily from the counter: fix them now, in graph order
            _touch_labels(prog)
        if not isinstance(prog, rasp.SOp):
            raise BuildError(f"case {self.id}: program() in {self.path.name} returned "
                             f"{type(prog).__name__}, not a RASP SOp")
        return prog

    def program_source(self) -> str:
        """The source text of the spec's ``program()`` function."""
        try:
            return inspect.getsource(self.module.program)
        except (OSError, TypeError):
            return ""


def _touch_labels(expr) -> None:
    seen: set[int] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        _ = e.label
        stack.extend(e.children)


def _import_case_module(case_id: str, path: Path) -> ModuleType:
    mod_name = f"cbench_zoo_case_{case_id.replace('.', '_').replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"case {case_id}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise BuildError(f"case {case_id}: {path.name} failed to import: {type(exc).__name__}: {exc}") from None
    return module


def _check_spec(case_id: str, path: Path, module: ModuleType) -> dict:
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, dict):
        raise BuildError(f"case {case_id}: {path.name} has no SPEC dict")
    if not callable(getattr(module, "program", None)):
        raise BuildError(f"case {case_id}: {path.name} has no program() function")
    doc = dict(spec)
    lp = doc.get("label_positions")
    if isinstance(lp, str) and lp in _LABEL_POSITION_ALIASES:
        doc["label_positions"] = _LABEL_POSITION_ALIASES[lp]
    from cbench.schemas import validate

    violations = validate(doc, "case")
    if violations:
        detail = "; ".join(f"{v.path}: {v.message}" for v in violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        raise BuildError(f"case {case_id}: SPEC in {path.name} does not satisfy the case schema: {detail}{more}")
    if str(spec["id"]) != case_id:
        raise BuildError(f"case {case_id}: {path.name} says its id is {spec['id']!r}")
    if spec["min_seq_len"] > spec["max_seq_len"]:
        raise BuildError(f"case {case_id}: min_seq_len {spec['min_seq_len']} > max_seq_len {spec['max_seq_len']}")
    for special in ("bos", "pad"):
        if spec.get(special) is not None and spec[special] in spec["vocab"]:
            raise BuildError(f"case {case_id}: the {special.upper()} token {spec[special]!r} is also in the vocab")
    return spec


@lru_cache(maxsize=None)
def _load(case_id: str, path_str: str, mtime: float) -> CaseSpec:
    path = Path(path_str)
    module = _import_case_module(case_id, path)
    spec = _check_spec(case_id, path, module)
    return CaseSpec(
        id=case_id,
        description=spec["description"],
        task_type=spec["task_type"],
        vocab=tuple(spec["vocab"]),
        min_seq_len=int(spec["min_seq_len"]),
        max_seq_len=int(spec["max_seq_len"]),
        bos=spec["bos"],
        pad=spec.get("pad"),
        causal=bool(spec["causal"]),
        label_positions=spec["label_positions"],
        source=spec["source"],
        seed=int(spec["seed"]),
        training=dict(spec["training"]),
        notes=spec.get("notes"),
        path=path,
        spec=spec,
        module=module,
    )


def load_case(case_id: Any) -> CaseSpec:
    """The case with id ``case_id`` (``3``, ``"3"``, ``"case-3"``...).

    An unknown id, a spec that fails to import or violates the case schema raises one
    BuildError naming the case.
    """
    cid = normalize_case_id(case_id)
    path = _case_file(cid) if cid else None
    if not cid or path is None or not path.is_file():
        known = list_cases()
        raise BuildError(f"unknown case {str(case_id)!r}: no {path.name if path else 'spec'} in {cases_dir()}"
                         + did_you_mean(cid, known))
    return _load(cid, str(path), path.stat().st_mtime)


#: Names that stand for a set of cases in ``--cases`` (and ``resolve_case_ids``).
CASE_SETS = ("main", "appendix-h", "all")


def appendix_h_cases() -> list[str]:
    """The zoo's cases outside the 16 main ones: the tasks of the paper's appendix H (Table 11)."""
    return [c for c in list_cases() if c not in MAIN_CASES]


def resolve_case_ids(spec: str) -> list[str]:
    """Case ids from a comma-separated list (``"3,33"``), where ``main``, ``appendix-h`` and
    ``all`` stand for those sets; unknown ids raise BuildError."""
    ids = []
    for p in str(spec).split(","):
        p = p.strip()
        if p.lower() == "main":
            ids += list(MAIN_CASES)
        elif p.lower() == "appendix-h":
            ids += appendix_h_cases()
        elif p.lower() == "all":
            ids += list_cases()
        elif p:
            ids.append(normalize_case_id(p))
    if not ids:
        raise BuildError("no case ids given (expected a comma-separated list such as 3,33)")
    known = set(list_cases())
    for cid in ids:
        if cid not in known:
            load_case(cid)  # raises the one clear error
    return list(dict.fromkeys(ids))


__all__ = ["MAIN_CASES", "CASE_SETS", "CaseSpec", "appendix_h_cases", "load_case", "list_cases", "zoo_dir", "cases_dir", "normalize_case_id",
           "resolve_case_ids"]

