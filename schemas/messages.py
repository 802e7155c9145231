"""JSON paths and plain-language messages for schema violations: the shared core every
checker reports through.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cbench.errors import did_you_mean

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


