"""The FIND suite on disk (a pulled ``cbench/find`` snapshot) and the black-box runner.

:class:`FindSuite` knows every function's spec but hands out only :class:`BlackBox` objects,
whose ``__call__`` returns outputs and nothing else (no spec, code or parameters are attributes
of a BlackBox). Numeric calls get fresh noise per call, as in the paper.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from cbench.errors import FindError, UsageError, did_you_mean
from cbench.find import functions as F

CONFIGS = ("numeric", "strings")
DATA_FILE = "test-00000-of-00001.parquet"
MLP_FILE = "mlp.safetensors"


@dataclass(frozen=True)
class FindFunction:
    """One function with its answers (for scoring; never handed to an interpreter)."""

    id: str
    config: str
    subcategory: str
    family: str
    spec: dict
    code: str
    domain: str | None = None
    interval: tuple | None = None
    test_inputs: tuple = ()
    test_outputs: tuple = ()


class BlackBox:
    """Call a function without seeing it: ``box([1.0, 2.5])`` or ``box(["apple"])``."""

    __slots__ = ("id", "config", "_call")

    def __init__(self, fid: str, config: str, call):
        self.id, self.config, self._call = fid, config, call

    def __call__(self, inputs: Sequence):
        return self._call(inputs)

    def __repr__(self) -> str:
        return f"<FIND black box {self.id} ({self.config})>"


@dataclass
class FindSuite:
    root: Path
    functions: dict[str, FindFunction] = field(default_factory=dict)
    weights: dict = field(default_factory=dict, repr=False)
    source: dict = field(default_factory=dict)

    @classmethod
    def load(cls, root: str | os.PathLike, source: dict | None = None) -> "FindSuite":
        import pyarrow.parquet as pq

        root = Path(root)
        suite = cls(root=root, source=source or {"path": str(root)})
        found = False
        for config in CONFIGS:
            path = root / config / DATA_FILE
            if not path.is_file():
                continue
            found = True
            try:
                rows = pq.read_table(path).to_pylist()
            except Exception as exc:  # pyarrow raises several types for a broken file
                raise FindError(f"{path}: not a readable parquet file ({exc})") from None
            for r in rows:
                iv = None
                if r.get("corrupted"):
                    iv = (r.get("interval_lo"), r.get("interval_hi"))
                suite.functions[r["id"]] = FindFunction(
                    id=r["id"], config=config, subcategory=r["subcategory"], family=r["family"],
                    spec=json.loads(r["spec"]), code=r["code"], domain=r.get("domain"), interval=iv,
                    test_inputs=tuple(r.get("test_inputs") or ()), test_outputs=tuple(r.get("test_outputs") or ()))
            if config == "numeric" and (root / config / MLP_FILE).is_file():
                from safetensors.numpy import load_file

                suite.weights = load_file(str(root / config / MLP_FILE))
        if not found:
            raise FindError(f"{root}: no FIND suite here (expected numeric/{DATA_FILE} or strings/{DATA_FILE})")
        return suite

    # ------------------------------------------------------------------ lookup
    def ids(self, config: str | None = None) -> list[str]:
        return [i for i, f in self.functions.items() if config is None or f.config == config]

    def get(self, fid: str) -> FindFunction:
        try:
            return self.functions[fid]
        except KeyError:
            raise UsageError(f"no FIND function {fid!r}" + did_you_mean(fid, list(self.functions))
                             + f"; ids run {min(self.functions)}..{max(self.functions)}") from None

    # ------------------------------------------------------------------ black box
    def black_box(self, fid: str, seed: int | None = None) -> BlackBox:
        """A callable that evaluates ``fid`` and reveals nothing else. Numeric calls return
        floats (``None`` where the function is undefined), string calls return strings."""
        fn = self.get(fid)
        spec, weights = fn.spec, self.weights
        rng = np.random.default_rng(seed)
        if fn.config == "numeric":
            def call(inputs):
                x = parse_numeric(inputs)
                y = F.numeric_call(spec, x, rng, weights)
                return [float(v) if np.isfinite(v) else None for v in y]
        else:
            f = F.string_callable(spec)

            def call(inputs):
                return [f(str(s)) for s in inputs]
        return BlackBox(fid, fn.config, call)

    def call(self, fid: str, inputs: Sequence, seed: int | None = None) -> list:
        return self.black_box(fid, seed)(inputs)


def parse_numeric(inputs) -> np.ndarray:
    try:
        x = np.asarray([float(v) for v in inputs], dtype=np.float64)
    except (TypeError, ValueError):
        bad = next((v for v in inputs if not _is_number(v)), inputs)
        raise UsageError(f"numeric FIND functions take numbers; got {bad!r}") from None
    if not np.all(np.isfinite(x)):
        raise UsageError("numeric FIND functions take finite numbers (no nan or inf)")
    return x


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def load_suite(path: str | os.PathLike | None = None, *, revision: str | None = None, hub=None,
               endpoint: str | None = None) -> FindSuite:
    """The suite from a directory, or pulled from the hub (``cbench/find``) when no path is given."""
    if path is not None:
        return FindSuite.load(path)
    from cbench.hub.pull import pull

    snap = pull("find", revision, repo_type="dataset", hub=hub, endpoint=endpoint)
    return FindSuite.load(snap.path, source={"repo": snap.repo_id, "revision": snap.sha, "version": snap.tag})
