"""Reading JSON files safely (size, depth, NaN, duplicate keys: each one clear error) and
validating one file end to end without raising.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from cbench.errors import SchemaError
from cbench.schemas.documents import validate
from cbench.schemas.graph_documents import GRAPH_KINDS, check_against_graph
from cbench.schemas.messages import Violation, _json_type, _short
from cbench.schemas.registry import MAX_JSON_BYTES, _kind_name, kind_of


# ---------------------------------------------------------------------------- files
class _DuplicateKey(ValueError):
    pass


def _pairs_hook(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"duplicate key {_short(k)} in one object (JSON parsers would silently keep only one)")
        out[k] = v
    return out


def _parse_constant(name):
    raise ValueError(f"{name} is not allowed (JSON has no NaN or Infinity; write a number or null)")


def _parse_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a double (it would become Infinity)")
    return value


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n} bytes"


def read_json(path: str | os.PathLike) -> Any:
    """Parse a JSON file; every bad file becomes one :class:`~cbench.errors.SchemaError` line
    that starts with the path (missing, a directory, not a regular file, larger than
    :data:`MAX_JSON_BYTES`, empty, binary or not UTF-8, not JSON, NaN/Infinity, duplicate keys,
    nested too deeply)."""
    from cbench.safe_io import read_regular_file

    where = str(path)
    try:
        data = read_regular_file(path, MAX_JSON_BYTES, what="a JSON file", error=SchemaError)
    except SchemaError as exc:
        msg = str(exc)
        if "bytes is more than" in msg or "more than cbench reads" in msg:
            try:
                size = f"{_size(os.stat(path).st_size)} is larger"
            except OSError:
                size = "larger"
            raise SchemaError(f"{where}: {size} than the {_size(MAX_JSON_BYTES)} cbench reads for one JSON "
                              "document; refusing to read it") from None
        raise
    return loads(data, where)


def loads(data: bytes | str, where: str = "<document>") -> Any:
    """Parse JSON text or bytes with :func:`read_json`'s rules; errors start with ``where``."""
    if isinstance(data, (bytes, bytearray)):
        if not data.strip():
            raise SchemaError(f"{where}: empty file, not JSON")
        if b"\x00" in data[:8192]:
            raise SchemaError(f"{where}: binary file (it contains NUL bytes), not JSON")
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SchemaError(f"{where}: binary file or not UTF-8 text (byte {exc.start}), not JSON") from None
    else:
        text = data
    if not text.strip():
        raise SchemaError(f"{where}: empty file, not JSON")
    try:
        return json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_parse_constant,
                          parse_float=_parse_float)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{where}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise SchemaError(f"{where}: not a usable JSON document: nested too deeply") from None
    except ValueError as exc:  # duplicate keys, NaN, huge numbers, int digit limit
        raise SchemaError(f"{where}: not a usable JSON document: {exc}") from None


# ---------------------------------------------------------------------------- one file
@dataclass
class FileReport:
    """The outcome of validating one file (what ``cbench validate`` prints)."""

    path: str
    kind: str | None
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None  # a file that could not be read or identified at all

    @property
    def valid(self) -> bool:
        return not self.violations and self.error is None

    def to_dict(self) -> dict:
        violations = [v.to_dict() for v in self.violations]
        if self.error is not None:
            violations.insert(0, {"path": "$", "message": self.error})
        return {"path": self.path, "kind": self.kind, "valid": self.valid, "violations": violations}


def validate_file(path: str | os.PathLike, kind: str | None = None, graph=None, case: str | None = None,
                  d_model: int | None = None) -> FileReport:
    """Read and validate one file (and check it against ``graph`` when given); never raises
    for a bad file (``kind`` must be a known kind or None)."""
    where = str(path)
    if kind is not None:
        kind = _kind_name(kind)
    try:
        doc = read_json(path)
    except SchemaError as exc:
        message = str(exc)
        prefix = f"{where}: "
        return FileReport(where, kind, error=message[len(prefix):] if message.startswith(prefix) else message)
    doc_kind = kind
    if doc_kind is None:
        if not isinstance(doc, Mapping):
            return FileReport(where, None, error=f"a cbench document is a JSON object, not {_json_type(doc)}")
        try:
            doc_kind = kind_of(doc)
        except SchemaError as exc:
            return FileReport(where, None, error=str(exc))
    violations = validate(doc, doc_kind)
    if graph is not None and doc_kind in GRAPH_KINDS and isinstance(doc, Mapping):
        # graph checks too, so one run reports everything; a path the schema already
        # flagged is not reported twice
        flagged = {v.path for v in violations}
        violations += [v for v in check_against_graph(doc, graph, case=case, d_model=d_model, kind=doc_kind)
                       if v.path not in flagged]
    return FileReport(where, doc_kind, violations)
