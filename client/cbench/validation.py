"""JSON Schema validation of cbench documents, with messages written for people.

Every cbench JSON document names its kind in a ``schema`` field (``"cbench/circuit/v1"``).
The schemas live in ``schemas/`` at the top of the repository and ship inside the package as
``cbench/schemas`` (draft 2020-12; shared definitions in ``defs.schema.json``).

* :func:`validate` returns every :class:`Violation` (a JSON path such as
  ``$.edges['a0.h0->m1'].score`` and a plain reason); :func:`check` raises
  :class:`~cbench.errors.SchemaError` listing them.
* :func:`read_json` reads a file and turns every kind of bad file (missing, a directory, empty,
  binary, not JSON, NaN/Infinity, duplicate keys, nested too deeply, larger than
  :data:`MAX_JSON_BYTES`) into one :class:`~cbench.errors.SchemaError` line.
* :func:`check_against_graph` adds the checks a schema cannot express for edge-scores, circuit
  and circuits-at-sizes files: every name exists in the model's graph, the cfg matches it,
  every edge is scored, circuit sizes respect MIB's grid.
* :func:`validate_file` does all of it for one file and never raises (the CLI uses it).

Choices: NaN and Infinity are not JSON (RFC 8259) and are refused, in files and in documents
passed in memory. Duplicate keys are refused (parsers silently keep one of them). Tuples count
as arrays (``json.dump`` writes them as arrays).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from cbench.errors import SchemaError, UsageError, did_you_mean

SCHEMA_KINDS: tuple[str, ...] = (
    "case",
    "model-meta",
    "circuit",
    "correspondence",
    "benchmark-index",
    "edge-scores",
    "circuits-at-sizes",
    "results",
    # FIND (issue 22)
    "find-submission",
    "find-results",
)
SCHEMA_VERSION = "v1"
SCHEMA_BASE_URI = "https://cbench.dev/schemas/"
DEFS_FILE = "defs.schema.json"

#: files larger than this are refused before reading (64 MiB)
MAX_JSON_BYTES = 64 * 1024 * 1024
#: documents nested deeper than this are refused (no cbench document comes near it)
MAX_DEPTH = 64
#: MIB's circuit-size grid (fractions of the graph's edges)
SIZE_GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)

_SCHEMA_ID_RE = re.compile(r"^cbench/([a-z][a-z0-9-]*)/(v[0-9]+)$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, order=True)
class Violation:
    """One way a document breaks its schema: where (a JSON path) and why (plain English)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def to_dict(self) -> dict:
        return {"path": self.path, "message": self.message}


# ---------------------------------------------------------------------------- schemas
def _schema_dir():
    return resources.files("cbench").joinpath("schemas")


def _kind_name(kind: str) -> str:
    """Accept ``'circuit'`` or ``'cbench/circuit/v1'``; refuse anything else."""
    if isinstance(kind, str):
        m = _SCHEMA_ID_RE.match(kind)
        name = m[1] if m and m[2] == SCHEMA_VERSION else kind
        if name in SCHEMA_KINDS:
            return name
    raise UsageError(f"unknown schema kind {kind!r}" + did_you_mean(str(kind), SCHEMA_KINDS)
                     + f"; the kinds are: {', '.join(SCHEMA_KINDS)}")


@functools.lru_cache(maxsize=None)
def _load_raw(filename: str) -> dict:
    try:
        text = _schema_dir().joinpath(filename).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:  # a broken install, not a user error
        raise SchemaError(f"cbench's schema file {filename} is missing from the installed package ({exc})") from None
    return json.loads(text)


def load_schema(kind: str) -> dict:
    """The JSON Schema (a fresh dict) for ``kind`` (``'circuit'`` or ``'cbench/circuit/v1'``)."""
    return copy.deepcopy(_load_raw(f"{_kind_name(kind)}.schema.json"))


def schema_id(kind: str) -> str:
    """The value of the ``schema`` field for ``kind``: ``'cbench/<kind>/v1'``."""
    return f"cbench/{_kind_name(kind)}/{SCHEMA_VERSION}"


def kind_of(doc: Any) -> str:
    """The kind a document declares in its ``schema`` field; SchemaError if none or unknown."""
    if not isinstance(doc, Mapping):
        raise SchemaError(f"a cbench document is a JSON object, not {_json_type(doc)}")
    if "schema" not in doc:
        raise SchemaError("the document has no 'schema' field naming its kind "
                          "(e.g. \"schema\": \"cbench/circuit/v1\"); pass the kind explicitly (--schema KIND)")
    value = doc["schema"]
    if not isinstance(value, str):
        raise SchemaError(f"'schema' must be a string like 'cbench/circuit/v1', not {_json_type(value)}")
    m = _SCHEMA_ID_RE.match(value)
    if not m:
        raise SchemaError(f"'schema' is {_short(value)}, which is not of the form 'cbench/<kind>/v1'"
                          + did_you_mean(value, [schema_id(k) for k in SCHEMA_KINDS]))
    name, version = m[1], m[2]
    if name not in SCHEMA_KINDS:
        raise SchemaError(f"unknown schema kind {name!r} in 'schema'" + did_you_mean(name, SCHEMA_KINDS)
                          + f"; the kinds are: {', '.join(SCHEMA_KINDS)}")
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{value!r} is a version this cbench does not know; it reads cbench/{name}/{SCHEMA_VERSION}")
    return name


_ANNOTATIONS = frozenset({"description", "title", "$comment", "examples", "default", "format", "$schema", "$id"})


def _inline(node: Any, base: str, stack: tuple = ()) -> Any:
    """A copy of a schema with every ``$ref`` replaced by what it points to (cbench's schemas
    are not recursive). Validating against it skips reference resolution, which dominated the
    time of large documents. The definition's description wins over a sibling's, because
    messages quote it."""
    if isinstance(node, list):
        return [_inline(x, base, stack) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline(v, base, stack) for k, v in node.items() if k != "$ref"}
    ref = node.get("$ref")
    if isinstance(ref, str):
        target_uri = ref if not ref.startswith("#") else base + ref
        if target_uri in stack:
            raise SchemaError(f"cbench schema reference cycle at {target_uri}")
        doc_uri, _, pointer = target_uri.partition("#")
        target: Any = _schema_by_id()[doc_uri]
        for part in [p for p in pointer.split("/") if p]:
            target = target[part.replace("~1", "/").replace("~0", "~")]
        resolved = _inline(target, doc_uri, stack + (target_uri,))
        clash = set(resolved) & set(out) - _ANNOTATIONS
        if clash:
            out = {"allOf": [resolved, out]}
        else:
            out = {**out, **resolved}
    return out


@functools.lru_cache(maxsize=None)
def _schema_by_id() -> dict:
    found = {}
    for entry in _schema_dir().iterdir():
        if entry.name.endswith(".schema.json"):
            schema = _load_raw(entry.name)
            found[schema["$id"]] = schema
    return found


@functools.lru_cache(maxsize=None)
def _registry():
    from referencing import Registry, Resource

    resources_ = []
    for entry in _schema_dir().iterdir():
        if entry.name.endswith(".schema.json"):
            schema = _load_raw(entry.name)
            resources_.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources_)


def _compile_pattern(pattern: str):
    """ECMA-262 semantics where they differ from Python's: ``\\d`` is ASCII only and ``$``
    at the end does not match before a trailing newline."""
    return _compile_pattern_cached(pattern)


@functools.lru_cache(maxsize=512)
def _compile_pattern_cached(pattern: str):
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern, re.ASCII)


# -- fast paths: a map of 32,491 edges should not take jsonschema's generic route per entry.
# A subschema made only of simple keywords compiles to a predicate; entries that pass it are
# valid, and only entries that fail are handed to the full validator for its error messages.
_FAST_TYPES = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, (list, tuple)),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "integer": lambda x: (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer()),
}
_FAST_KEYWORDS = frozenset({"type", "pattern", "enum", "const", "minimum", "maximum", "minLength", "maxLength",
                            "required", "properties", "additionalProperties", "anyOf"}) | _ANNOTATIONS


def _fast_predicate(schema: Any):
    """An exact ``instance -> bool`` for a simple subschema, or None when it is not simple."""
    key = id(schema)
    if key in _FAST_CACHE:
        return _FAST_CACHE[key][1]
    pred = _build_fast(schema)
    _FAST_CACHE[key] = (schema, pred)  # keep the schema alive so its id stays unique
    return pred


_FAST_CACHE: dict[int, tuple] = {}


def _build_fast(schema: Any):
    if schema is True:
        return lambda x: True
    if not isinstance(schema, dict) or set(schema) - _FAST_KEYWORDS:
        return None
    checks = []
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        if any(t not in _FAST_TYPES for t in types):
            return None
        fns = [_FAST_TYPES[t] for t in types]
        checks.append(fns[0] if len(fns) == 1 else (lambda x, fns=fns: any(f(x) for f in fns)))
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        if all(isinstance(v, str) for v in values):
            allowed = frozenset(values)
            checks.append(lambda x, allowed=allowed: isinstance(x, str) and x in allowed)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            nums = list(values)
            checks.append(lambda x, nums=nums: isinstance(x, (int, float)) and not isinstance(x, bool) and x in nums)
        else:
            return None
    if "pattern" in schema:
        rx = _compile_pattern(schema["pattern"])
        checks.append(lambda x, rx=rx: not isinstance(x, str) or rx.search(x) is not None)
    for kw, op in (("minimum", lambda x, b: x >= b), ("maximum", lambda x, b: x <= b)):
        if kw in schema:
            bound = schema[kw]
            checks.append(lambda x, b=bound, op=op: isinstance(x, bool) or not isinstance(x, (int, float)) or op(x, b))
    if "minLength" in schema or "maxLength" in schema:
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", float("inf"))
        checks.append(lambda x, lo=lo, hi=hi: not isinstance(x, str) or lo <= len(x) <= hi)
    if "required" in schema:
        req = list(schema["required"])
        checks.append(lambda x, req=req: not isinstance(x, dict) or all(k in x for k in req))
    if "properties" in schema or "additionalProperties" in schema:
        props = {}
        for name, sub in (schema.get("properties") or {}).items():
            p = _fast_predicate(sub)
            if p is None:
                return None
            props[name] = p
        extra = schema.get("additionalProperties", True)
        extra_pred = _fast_predicate(extra) if extra is not False else False
        if extra_pred is None:
            return None

        def props_ok(x, props=props, extra_pred=extra_pred):
            if not isinstance(x, dict):
                return True
            for k, v in x.items():
                p = props.get(k)
                if p is not None:
                    if not p(v):
                        return False
                elif extra_pred is False or not extra_pred(v):
                    return False
            return True

        checks.append(props_ok)
    if "anyOf" in schema:
        subs = [_fast_predicate(s) for s in schema["anyOf"]]
        if any(p is None for p in subs):
            return None
        checks.append(lambda x, subs=subs: any(p(x) for p in subs))
    if len(checks) == 1:
        return checks[0]

    def all_checks(x, checks=tuple(checks)):
        for c in checks:
            if not c(x):
                return False
        return True

    return all_checks


@functools.lru_cache(maxsize=1)
def _validator_class():
    from jsonschema import Draft202012Validator, ValidationError, validators

    base = Draft202012Validator.VALIDATORS

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string") and not _compile_pattern(patrn).search(instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def items(validator, items_schema, instance, schema):
        pred = _fast_predicate(items_schema) if isinstance(items_schema, dict) else None
        if pred is None or not validator.is_type(instance, "array") or "prefixItems" in schema:
            yield from base["items"](validator, items_schema, instance, schema)
            return
        for index, item in enumerate(instance):
            if not pred(item):
                yield from validator.descend(item, items_schema, path=index)

    def property_names(validator, names_schema, instance, schema):
        pred = _fast_predicate(names_schema)
        if pred is None or not validator.is_type(instance, "object"):
            yield from base["propertyNames"](validator, names_schema, instance, schema)
            return
        for key in instance:
            if not pred(key):
                yield from validator.descend(key, names_schema)

    def additional_properties(validator, ap, instance, schema):
        if not validator.is_type(instance, "object") or "patternProperties" in schema or not isinstance(ap, dict):
            yield from base["additionalProperties"](validator, ap, instance, schema)
            return
        pred = _fast_predicate(ap)
        known = schema.get("properties", {})
        for key, value in instance.items():  # document order, so reports are stable
            if key not in known and (pred is None or not pred(value)):
                yield from validator.descend(value, ap, path=key)

    def is_array(checker, instance):
        return isinstance(instance, (list, tuple))

    type_checker = Draft202012Validator.TYPE_CHECKER.redefine("array", is_array)
    return validators.extend(Draft202012Validator, type_checker=type_checker, validators={
        "pattern": pattern, "items": items, "propertyNames": property_names,
        "additionalProperties": additional_properties})


@functools.lru_cache(maxsize=None)
def _validator(kind: str):
    cls = _validator_class()
    schema = _inline(_load_raw(f"{kind}.schema.json"), f"{SCHEMA_BASE_URI}{kind}/{SCHEMA_VERSION}")
    return cls(schema, registry=_registry())


# ---------------------------------------------------------------------------- paths and reprs
def format_path(parts: Iterable[Any]) -> str:
    """``['edges', 'a0.h0->m1', 'score']`` -> ``$.edges['a0.h0->m1'].score``."""
    out = "$"
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            out += f"[{p}]"
        elif isinstance(p, str) and _IDENT_RE.match(p):
            out += f".{p}"
        else:
            out += f"[{_quote(str(p))}]"
    return out


def _quote(s: str, limit: int | None = None) -> str:
    if limit is not None and len(s) > limit:
        s = s[: limit - 3] + "..."
    body = []
    for ch in s:
        if ch == "\\":
            body.append("\\\\")
        elif ch == "'":
            body.append("\\'")
        elif ch in "\n\r\t":
            body.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ch.isprintable():
            body.append(ch)
        else:
            code = ord(ch)
            body.append(f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
    return "'" + "".join(body) + "'"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a Python {type(value).__name__}"


def _short(value: Any, limit: int = 60) -> str:
    """A short, printable rendering of a JSON value for messages."""
    if isinstance(value, str):
        return _quote(value, limit)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value.bit_length() <= 100:
            return str(value)
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, Mapping):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    return f"a Python {type(value).__name__}"


_TYPE_WORDS = {"object": "an object", "array": "an array", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _type_words(types) -> str:
    if isinstance(types, str):
        types = [types]
    words = [_TYPE_WORDS.get(t, t) for t in types]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------- messages
def _describe(error) -> str | None:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    desc = schema.get("description")
    return desc if isinstance(desc, str) and len(desc) <= 200 else None


def _message(error) -> str:
    """Rewrite one jsonschema error as a plain-English reason."""
    v, value, inst = error.validator, error.validator_value, error.instance
    desc = _describe(error)
    if v == "required":
        missing = [k for k in value if isinstance(inst, Mapping) and k not in inst]
        names = ", ".join(repr(k) for k in missing) or repr(value)
        return f"missing required field{'s' if len(missing) > 1 else ''} {names}"
    if v == "type":
        want = _type_words(value)
        return f"must be {want}, not {_json_type(inst)}" + (f" ({_short(inst)})" if _is_scalar(inst) else "")
    if v == "const":
        if isinstance(value, str) and value.startswith("cbench/"):
            return (f"must be {value!r} (this is validated as {value.split('/')[1]}), not {_short(inst)}")
        return f"must be {_short(value)}, not {_short(inst)}"
    if v == "enum":
        choices = ", ".join(_short(c) for c in value)
        return f"must be one of {choices}; got {_short(inst)}"
    if v == "pattern":
        if desc:
            return f"{_short(inst)} is not {desc}"
        return f"{_short(inst)} does not have the expected form (pattern {value})"
    if v == "minimum":
        return f"must be at least {value}; got {_short(inst)}"
    if v == "maximum":
        return f"must be at most {value}; got {_short(inst)}"
    if v == "exclusiveMinimum":
        return f"must be greater than {value}; got {_short(inst)}"
    if v == "exclusiveMaximum":
        return f"must be less than {value}; got {_short(inst)}"
    if v == "minLength":
        return "must not be empty" if value == 1 else f"must have at least {_plural(value, 'character')}"
    if v == "maxLength":
        return f"is too long ({_plural(len(inst), 'character')}; at most {value})"
    if v == "minItems":
        return "must not be empty" if value == 1 else f"must have at least {_plural(value, 'item')}; has {len(inst)}"
    if v == "maxItems":
        return f"must have at most {_plural(value, 'item')}; has {len(inst)}"
    if v == "minProperties":
        return "must not be empty" if value == 1 else f"must have at least {_plural(value, 'key')}"
    if v == "maxProperties":
        return f"must have at most {_plural(value, 'key')}"
    if v == "uniqueItems":
        dup = _first_duplicate(inst)
        if dup is not None:
            i, j = dup
            return f"has a duplicate item {_short(inst[j])} (at [{i}] and [{j}])"
        return "has duplicate items"
    if v == "additionalProperties" and value is False:
        allowed = list((error.schema.get("properties") or {}).keys())
        extra = [k for k in inst if k not in allowed]
        if extra:
            return f"unknown field {_short(extra[0])}" + did_you_mean(str(extra[0]), allowed)
        return "has unknown fields"
    if v == "not":
        if desc:
            return f"{_short(inst)} is not allowed here: must be {desc}"
        return f"{_short(inst)} is not allowed here"
    if v in ("anyOf", "oneOf"):
        return _alternatives_message(error, desc)
    if v == "format":
        return f"{_short(inst)} is not a valid {value}"
    if v == "dependentRequired":
        return error.message
    if v == "false":
        return "is not allowed here"
    return error.message if len(error.message) < 300 else f"fails the '{v}' rule of the schema"


def _alternatives_message(error, desc: str | None) -> str:
    inst = error.instance
    subs = list(error.context or ())
    if subs and all(s.validator == "required" for s in subs):
        fields = sorted({k for s in subs for k in s.validator_value})
        return "needs one of the fields " + " or ".join(repr(f) for f in fields)
    # a value of the right type but wrong content: explain that branch's problem
    for s in subs:
        if s.validator not in ("type",) and not list(s.relative_path):
            inner = _message(s)
            if desc:
                return f"must be {desc}: {inner}"
            return inner
    if desc:
        return f"must be {desc}; got {_short(inst)}"
    types = []
    for s in subs:
        if s.validator == "type":
            t = s.validator_value
            types += [t] if isinstance(t, str) else list(t)
    if types:
        return f"must be {_type_words(list(dict.fromkeys(types)))}, not {_json_type(inst)}"
    return f"{_short(inst)} matches none of the allowed forms"


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _first_duplicate(items) -> tuple[int, int] | None:
    seen: dict[str, int] = {}
    for j, item in enumerate(items):
        try:
            key = json.dumps(item, sort_keys=True)
        except (TypeError, ValueError, RecursionError):
            return None
        if isinstance(item, float) and item.is_integer():
            key = str(int(item))  # 1 and 1.0 are the same JSON number
        if key in seen:
            return seen[key], j
        seen[key] = j
    return None


def _violations_from(error) -> list[Violation]:
    """One jsonschema error -> violations (a bad key found by propertyNames points at that key)."""
    parts = list(error.absolute_path)
    if error.validator in ("anyOf", "oneOf") and error.context:
        subs = list(error.context)
        if not all(s.validator == "required" for s in subs):
            branches: dict[Any, list] = {}
            for s in subs:
                branches.setdefault(s.relative_schema_path[0] if s.relative_schema_path else None, []).append(s)
            # the branches whose type fits the value explain best what is wrong with it
            viable = [errs for errs in branches.values()
                      if not any(e.validator == "type" and not list(e.relative_path) for e in errs)]
            if viable:
                best = min(viable, key=len)
                found = [v for e in best for v in _violations_from(e)]
                if found:
                    return found
    if "propertyNames" in error.relative_schema_path or "propertyNames" in list(error.absolute_schema_path):
        parts.append(error.instance)
        return [Violation(format_path(parts), "key " + _message(error))]
    if error.validator == "additionalProperties" and error.validator_value is False and isinstance(error.instance, Mapping):
        allowed = list((error.schema.get("properties") or {}).keys())
        extra = [k for k in error.instance if k not in allowed]
        return [Violation(format_path(parts + [k]), "unknown field" + did_you_mean(str(k), allowed)) for k in extra]
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [k for k in error.validator_value if k not in error.instance]
        return [Violation(format_path(parts), f"missing required field {k!r}") for k in missing] or \
            [Violation(format_path(parts), _message(error))]
    return [Violation(format_path(parts), _message(error))]


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
    for i, e in enumerate(doc.get("entries") or []):
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


# ---------------------------------------------------------------------------- semantic checks
GRAPH_KINDS = ("edge-scores", "circuit", "circuits-at-sizes")


def check_against_graph(doc: Mapping, graph, case: str | None = None, d_model: int | None = None,
                        kind: str | None = None) -> list[Violation]:
    """Checks of an edge-scores, circuit or circuits-at-sizes document against a model's graph
    (a :class:`cbench.graph.Graph`): the cfg/graph block matches, every node and edge name
    exists, no duplicates, scores are finite, circuit sizes respect the grid. ``case`` (the
    model's case id) and ``d_model`` are compared when given. Run it on a schema-valid document;
    parts with the wrong shape are skipped, not reported twice.
    """
    if not isinstance(doc, Mapping):
        return [Violation("$", f"a cbench document is a JSON object, not {_json_type(doc)}")]
    if kind is None:
        kind = _safe_kind(doc)
    else:
        kind = _kind_name(kind)
    if kind not in GRAPH_KINDS:
        return []
    out: list[Violation] = []
    doc_case = doc.get("case")
    if case is not None and isinstance(doc_case, str) and str(doc_case) != str(case):
        out.append(Violation("$.case", f"this file is for case {doc_case!r} but the model is case {case!r}"))

    if kind == "edge-scores":
        out += _check_cfg(doc.get("cfg"), "$.cfg", graph, d_model)
        nodes = doc.get("nodes")
        if isinstance(nodes, Mapping):
            for name in nodes:
                if isinstance(name, str) and not graph.has_node(name):
                    out.append(_not_in_graph(["nodes", name], "node", name, graph.node_names, graph))
        edges = doc.get("edges")
        if isinstance(edges, Mapping):
            for name, entry in edges.items():
                if isinstance(name, str) and not graph.has_edge(name):
                    out.append(_not_in_graph(["edges", name], "edge", name, graph.edge_names, graph))
                score = entry.get("score") if isinstance(entry, Mapping) else None
                if isinstance(score, float) and not math.isfinite(score):
                    out.append(Violation(format_path(["edges", name, "score"]), f"{score!r} is not a finite number"))
            missing = [e for e in graph.edge_names if e not in edges]
            if missing:
                examples = ", ".join(repr(e) for e in missing[:3])
                out.append(Violation("$.edges", f"{len(missing)} of the graph's {graph.n_edges} edges have no score "
                                                f"(e.g. {examples}); every edge needs one"))
    elif kind == "circuit":
        shape = doc.get("graph")
        out += _check_cfg(shape, "$.graph", graph, d_model)
        head = doc.get("granularity") == "head"
        known_edges = set(graph.head_edge_names) if head else set(graph.edge_names)
        edges = doc.get("edges")
        nodes = doc.get("nodes")
        node_set = set(n for n in nodes if isinstance(n, str)) if isinstance(nodes, (list, tuple)) else None
        if isinstance(nodes, (list, tuple)):
            out += _check_names(nodes, ["nodes"], "node", graph.node_names, graph)
        if isinstance(edges, (list, tuple)):
            out += _check_names(edges, ["edges"], "edge", known_edges, graph)
            if node_set is not None:
                for i, name in enumerate(edges):
                    if isinstance(name, str) and name in known_edges:
                        src, dst = name.split("->", 1)
                        dst = dst.split("<", 1)[0]
                        for end in (src, dst):
                            if end not in node_set:
                                out.append(Violation(format_path(["edges", i]),
                                                     f"edge {name!r} uses node {end!r}, which is not in $.nodes"))
        high = doc.get("high_level")
        ops = high.get("ops") if isinstance(high, Mapping) else None
        if isinstance(ops, (list, tuple)):
            for i, op in enumerate(ops):
                comps = op.get("components") if isinstance(op, Mapping) else None
                if isinstance(comps, (list, tuple)):
                    for j, name in enumerate(comps):
                        if isinstance(name, str) and not graph.has_node(name):
                            out.append(_not_in_graph(["high_level", "ops", i, "components", j], "node", name,
                                                     graph.node_names, graph))
    elif kind == "circuits-at-sizes":
        if "cfg" in doc:
            out += _check_cfg(doc.get("cfg"), "$.cfg", graph, d_model)
        circuits = doc.get("circuits")
        if isinstance(circuits, (list, tuple)):
            for i, c in enumerate(circuits):
                if not isinstance(c, Mapping):
                    continue
                frac, edges = c.get("fraction"), c.get("edges")
                if isinstance(edges, (list, tuple)):
                    out += _check_names(edges, ["circuits", i, "edges"], "edge", graph.edge_names, graph)
                if _is_number(frac) and frac not in SIZE_GRID:
                    out.append(Violation(format_path(["circuits", i, "fraction"]),
                                         f"{_short(frac)} is not on MIB's size grid "
                                         f"({', '.join(f'{g:g}' for g in SIZE_GRID)})"))
                elif _is_number(frac) and isinstance(edges, (list, tuple)):
                    limit = math.ceil(Fraction(repr(float(frac))) * graph.n_edges)
                    if len(edges) > limit:
                        out.append(Violation(format_path(["circuits", i, "edges"]),
                                             f"{len(edges)} edges is more than a circuit of size {frac:g} may have "
                                             f"(ceil({frac:g} x {graph.n_edges} edges) = {limit})"))
    return out


def _check_cfg(cfg, where: str, graph, d_model) -> list[Violation]:
    if not isinstance(cfg, Mapping):
        return []
    out = []
    expected = {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "parallel_attn_mlp": graph.parallel_attn_mlp,
                "has_mlp": graph.has_mlp}
    if d_model is not None:
        expected["d_model"] = d_model
    for key, want in expected.items():
        if key in cfg and (cfg[key] != want or type(cfg[key]) is not type(want)):
            out.append(Violation(f"{where}.{key}", f"is {_short(cfg[key])} but the model has {key} = {_short(want)}"))
    return out


def _check_names(names, parts: list, what: str, known, graph) -> list[Violation]:
    out = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            out.append(Violation(format_path(parts + [i]), f"duplicate {what} {name!r} (also at [{seen[name]}])"))
            continue
        seen[name] = i
        if name not in known:
            out.append(_not_in_graph(parts + [i], what, name, known, graph))
    return out


_EDGE_PARTS_RE = re.compile(r"^(.*?)->(.*?)(?:<([qkv])>)?$", re.S)


def _not_in_graph(parts, what: str, name: str, known, graph) -> Violation:
    where = f"the model's graph ({graph.describe()})"
    return Violation(format_path(parts), f"{what} {_short(name)} is not in {where}" + _hint(what, name, known, graph))


def _hint(what: str, name: str, known, graph) -> str:
    """A cheap, specific suggestion (difflib over 32,491 edge names would take seconds)."""
    L, H = graph.n_layers, graph.n_heads
    nodes = f"the nodes are input, a0.h0 to a{L - 1}.h{H - 1}" + (f", m0 to m{L - 1}" if graph.has_mlp else "") + " and logits"
    if what == "node":
        found = did_you_mean(name, graph.node_names) if len(name) < 100 else ""
        return found or f" ({nodes})"
    m = _EDGE_PARTS_RE.match(name)
    if not m:
        return ""
    src, dst, qkv = m.groups()
    missing = [n for n in (src, dst) if not graph.has_node(n)]
    if missing:
        return f" ({' and '.join(_short(n) for n in missing)} {'is' if len(missing) == 1 else 'are'} not a node of it; {nodes})"
    variants = [f"{src}->{dst}"] + [f"{src}->{dst}<{q}>" for q in "qkv"]
    close = [v for v in variants if v in known and v != name]
    if close:
        return f" (did you mean: {', '.join(close)}?)"
    return f" ({src} does not feed {dst}: a node reads only what earlier layers wrote)"


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
