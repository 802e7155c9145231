"""Results documents (``cbench/results/v1``), readable tables and plots for the scoring commands."""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from cbench.errors import ArtifactError, SchemaError

__all__ = ["results_document", "write_results", "file_input", "fmt", "plot_roc", "write_bytes_atomic"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become null, numpy scalars become Python numbers."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if np is not None:
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            value = float(value)
        if isinstance(value, np.ndarray):
            return _clean(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def results_document(kind: str, results: Mapping, inputs: Mapping, case: str | None = None,
                     cases: Sequence[str] | None = None, runtime_s: float | None = None, **extra) -> dict:
    """A schema-valid ``cbench/results/v1`` document (checked before it is returned)."""
    from cbench.about import __version__
    from cbench.schemas import check

    doc: dict = {"schema": "cbench/results/v1", "kind": kind}
    if case is not None:
        doc["case"] = str(case)
    if cases is not None:
        doc["cases"] = [str(c) for c in cases]
    doc.update({"inputs": _clean(dict(inputs)), "results": _clean(dict(results)), "cbench_version": __version__,
                "created": _now(), "runtime_s": None if runtime_s is None else round(float(runtime_s), 3)})
    doc.update(_clean(extra))
    check(doc, "results", source="results document")
    return doc


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write through cbench's one output writer (:func:`cbench.files.safe_io.write_output`)."""
    from cbench.files.safe_io import write_output

    return write_output(path, data)


def write_results(path: str | os.PathLike, doc: Mapping) -> Path:
    """Write a results document atomically (temp file, then rename)."""
    import json

    return write_bytes_atomic(path, (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def file_input(path: str | os.PathLike) -> dict:
    p = Path(path)
    try:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError as e:
        raise SchemaError(f"{p}: cannot read it ({e.strerror or e})") from None
    return {"path": str(p), "sha256": digest}


def fmt(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def plot_roc(path: str | os.PathLike, curves: Mapping[str, tuple[Sequence[float], Sequence[float], float]],
             title: str) -> Path:
    """One PNG with a ROC curve per entry ``label -> (fpr, tpr, auroc)``, written atomically."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=120)
    for label, (fpr, tpr, area) in curves.items():
        ax.plot(fpr, tpr, marker=".", label=f"{label} (AUROC {fmt(area, 3)})")
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.8)
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return write_bytes_atomic(path, buf.getvalue())
