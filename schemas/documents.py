"""Validate one document: its schema, its structure (depth, sizes, integers) and the rules a
schema cannot express for its kind.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from cbench.errors import SchemaError
from cbench.schemas.messages import (
    Violation,
    _json_type,
    _plural,
    _short,
    _violations_from,
    format_path,
)
from cbench.schemas.registry import MAX_DEPTH, _kind_name, _validator, kind_of

# ---------------------------------------------------------------------------- structure walk
#: integers longer than this many bits are refused (Python cannot even print them by default)
MAX_INT_BITS = 13000  # about 3900 decimal digits


def _walk(doc: Any) -> tuple[list[Violation], bool]:
    """Checks on the raw structure that no schema can express: values JSON cannot hold
    (NaN, Infinity, sets, bytes, objects), non-string keys, integers too long to handle and
    nesting deeper than MAX_DEPTH. Returns the violations and whether they are fatal (the
    schema validator must not look at the document)."""
    out: list[Violation] = []
    fatal = False
    # containers are pushed with their path; scalars are checked where they are found
    stack: list[tuple[Any, tuple, int]] = [(doc, (), 0)]

    def scalar(value, parts_of) -> bool:
        """False (and a violation) when ``value`` is not a usable JSON scalar."""
        t = type(value)
        if t is str or t is bool or value is None:
            return True
        if t is float:
            if value != value or value in (math.inf, -math.inf):
                out.append(Violation(format_path(parts_of()), f"{value!r} is not a finite number (JSON has no NaN or Infinity)"))
            return True
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                out.append(Violation(format_path(parts_of()), f"{_short(value)} is too large an integer"))
                return False
            return True
        if isinstance(value, float):
            if not math.isfinite(value):
                out.append(Violation(format_path(parts_of()), f"{value!r} is not a finite number (JSON has no NaN or Infinity)"))
            return True
        if isinstance(value, str):
            return True
        out.append(Violation(format_path(parts_of()), f"{_json_type(value)} is not a JSON value"))
        return False

    if not (isinstance(doc, (dict, list, tuple)) or isinstance(doc, Mapping)):
        return out, not scalar(doc, lambda: ())
    while stack and len(out) < 1000:
        value, parts, depth = stack.pop()
        if depth > MAX_DEPTH:
            out.append(Violation(format_path(parts), f"nested more than {MAX_DEPTH} levels deep"))
            fatal = True
            continue
        if type(value) is dict or (type(value) not in (list, tuple) and isinstance(value, Mapping)):
            for k, v in value.items():
                if type(k) is not str:
                    out.append(Violation(format_path(parts), f"has a key that is {_json_type(k)}, not a string ({_short(k)})"))
                    fatal = True
                    continue
                tv = type(v)
                if tv is dict or tv is list or tv is tuple or (tv not in (str, int, float, bool) and isinstance(v, Mapping)):
                    stack.append((v, parts + (k,), depth + 1))
                elif not scalar(v, lambda k=k: parts + (k,)):
                    fatal = True
        else:
            for i, v in enumerate(value):
                tv = type(v)
                if tv is dict or tv is list or tv is tuple or (tv not in (str, int, float, bool) and isinstance(v, Mapping)):
                    stack.append((v, parts + (i,), depth + 1))
                elif not scalar(v, lambda i=i: parts + (i,)):
                    fatal = True
    out.sort(key=lambda v: v.path)
    return out, fatal


# ---------------------------------------------------------------------------- validate
def validate(doc: Any, kind: str | None = None) -> list[Violation]:
    """Every violation of ``doc`` against the schema of ``kind`` (default: its ``schema`` field).

    Returns an empty list for a valid document. Raises only :class:`~cbench.errors.UsageError`
    for an unknown ``kind`` argument; everything wrong with the document is a Violation.
    """
    if kind is not None:
        kind = _kind_name(kind)
    if not isinstance(doc, Mapping):
        return [Violation("$", f"a cbench document is a JSON object, not {_json_type(doc)}")]
    structural, fatal = _walk(doc)
    if fatal:
        return structural  # the schema validator cannot safely look at it
    if kind is None:
        try:
            kind = kind_of(doc)
        except SchemaError as exc:
            return structural + [Violation("$.schema" if "schema" in doc else "$", str(exc))]
    try:
        errors = list(_validator(kind).iter_errors(doc))
    except RecursionError:
        return structural + [Violation("$", f"nested too deeply to validate (limit {MAX_DEPTH} levels)")]
    found: list[Violation] = list(structural)
    for error in errors:
        found.extend(_violations_from(error))
    found.extend(_document_checks(doc, kind))
    return _dedupe(found)


def _dedupe(violations: list[Violation]) -> list[Violation]:
    return list(dict.fromkeys(violations))


def check(doc: Any, kind: str | None = None, source: str | None = None) -> str:
    """Raise :class:`~cbench.errors.SchemaError` listing every violation; return the kind if valid."""
    violations = validate(doc, kind)
    if violations:
        what = kind or (_safe_kind(doc) or "cbench")
        where = f"{source}: " if source else ""
        raise SchemaError(f"{where}{what} document is not valid: {_plural(len(violations), 'violation')}",
                          [str(v) for v in violations])
    return _kind_name(kind) if kind else kind_of(doc)


def _safe_kind(doc) -> str | None:
    try:
        return kind_of(doc)
    except SchemaError:
        return None


def _find_interval_checks(doc: Mapping) -> list[Violation]:
    out = []
    entries = doc.get("entries")
    for i, e in enumerate(entries if isinstance(entries, (list, tuple)) else []):  # else: the schema says so
        iv = e.get("interval") if isinstance(e, Mapping) else None
        if isinstance(iv, (list, tuple)) and len(iv) == 2 and all(isinstance(v, (int, float)) for v in iv) \
                and not any(isinstance(v, bool) for v in iv) and iv[0] > iv[1]:
            out.append(Violation(f"$.entries[{i}].interval", f"lower bound {iv[0]!r} is above upper bound {iv[1]!r}"))
        if isinstance(e, Mapping) and isinstance(e.get("id"), str) and e["id"].startswith("s") and iv is not None:
            out.append(Violation(f"$.entries[{i}].interval", "string functions have no corrupted interval"))
    return out


def _document_checks(doc: Mapping, kind: str) -> list[Violation]:
    """Rules across fields that JSON Schema cannot state (run after the schema)."""
    out: list[Violation] = []
    lo, hi = doc.get("min_seq_len"), doc.get("max_seq_len")
    if _is_int(lo) and _is_int(hi) and lo > hi:
        out.append(Violation("$.min_seq_len", f"min_seq_len ({lo}) is larger than max_seq_len ({hi})"))
    if kind == "find-submission":
        out.extend(_find_interval_checks(doc))
    if kind == "model-meta":
        tokens = doc.get("input_tokens")
        if isinstance(tokens, (list, tuple)):
            for key in ("bos_token", "pad_token"):
                tok = doc.get(key)
                if isinstance(tok, str) and tok not in tokens:
                    out.append(Violation(f"$.{key}", f"{_short(tok)} is not one of input_tokens"))
    elif kind == "circuit":
        marks, edges = doc.get("edge_signal"), doc.get("edges")
        if isinstance(marks, Mapping) and isinstance(edges, (list, tuple)):
            listed = set(e for e in edges if isinstance(e, str))
            for name in marks:
                if name not in listed:
                    out.append(Violation(format_path(("edge_signal", name)),
                                         f"{_short(name)} is not one of the circuit's edges; only ground-truth edges "
                                         "can be marked"))
    elif kind == "circuits-at-sizes":
        circuits = doc.get("circuits")
        if isinstance(circuits, (list, tuple)):
            seen: dict[float, int] = {}
            for i, c in enumerate(circuits):
                f = c.get("fraction") if isinstance(c, Mapping) else None
                if _is_number(f):
                    if f in seen:
                        out.append(Violation(f"$.circuits[{i}].fraction",
                                             f"fraction {f} appears twice (also at $.circuits[{seen[f]}])"))
                    else:
                        seen[f] = i
    elif kind == "benchmark-index":
        cases = doc.get("cases")
        if isinstance(cases, (list, tuple)):
            seen_case: dict[str, int] = {}
            for i, c in enumerate(cases):
                if not isinstance(c, Mapping):
                    continue
                cid = c.get("case")
                if isinstance(cid, str):
                    if cid in seen_case:
                        out.append(Violation(f"$.cases[{i}].case", f"case {cid!r} is listed twice (also at $.cases[{seen_case[cid]}])"))
                    else:
                        seen_case[cid] = i
                versions = c.get("versions")
                if isinstance(versions, (list, tuple)):
                    seen_v: dict[str, int] = {}
                    for j, ver in enumerate(versions):
                        tag = ver.get("version") if isinstance(ver, Mapping) else None
                        if isinstance(tag, str):
                            if tag in seen_v:
                                out.append(Violation(f"$.cases[{i}].versions[{j}].version",
                                                     f"version {tag!r} is listed twice for case {cid!r}"))
                            else:
                                seen_v[tag] = j
    return out


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and math.isfinite(x))


