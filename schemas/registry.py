"""The schema kinds, the JSON Schema files that define them, and their compiled validators
(a fast path for the simple keywords, ``jsonschema`` for the rest).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from importlib import resources
from typing import Any, Mapping

from cbench.errors import SchemaError, UsageError, did_you_mean
from cbench.schemas.messages import _json_type, _short

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


def schema_registry():
    """A ``referencing.Registry`` with every cbench schema under its ``$id``: what plain
    ``jsonschema`` needs to follow the schemas' ``$ref``\ s to the shared definitions
    (``jsonschema.validate(doc, load_schema("circuit"), registry=schema_registry())``) without
    fetching anything. The ``$id`` s (``https://cbench.dev/schemas/<kind>/v1``) are names, not
    addresses to download: the hub repository ``cbench/schemas`` holds the same files."""
    return _registry()


def bundled_schema(kind: str) -> dict:
    """The schema of ``kind`` as one self-contained document (JSON Schema 2020-12 bundling): the
    shared definitions embedded under ``$defs`` with their own ``$id``, so a plain validator
    resolves every ``$ref`` inside the document, with no registry and no network:
    ``jsonschema.validate(doc, bundled_schema("edge-scores"))``."""
    schema = load_schema(kind)
    schema.setdefault("$defs", {})[BUNDLED_DEFS_KEY] = copy.deepcopy(_load_raw(DEFS_FILE))
    return schema


BUNDLED_DEFS_KEY = "cbench-defs-v1"


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


