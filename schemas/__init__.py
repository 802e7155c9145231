"""The JSON Schemas of cbench's documents and their validation, with messages written for people.

Every cbench JSON document names its kind in a ``schema`` field (``"cbench/circuit/v1"``). The
schemas are the ``*.schema.json`` files beside this package (draft 2020-12; shared definitions in
``defs.schema.json``), shipped inside the client as ``cbench/schemas``.

* ``registry``: the kinds, their schema files and compiled validators;
* ``messages``: JSON paths and plain-language messages (the shared core every check reports through);
* ``documents``: :func:`validate` / :func:`check` one document (schema, structure, per-kind rules);
* ``graph_documents``: :func:`check_against_graph` for edge-scores, circuit and circuits-at-sizes;
* ``json_files``: :func:`read_json` (every kind of bad file is one :class:`~cbench.errors.SchemaError`
  line) and :func:`validate_file` (all of it for one file, never raises).

Choices: NaN and Infinity are not JSON (RFC 8259) and are refused, in files and in documents
passed in memory. Duplicate keys are refused (parsers silently keep one of them). Tuples count
as arrays (``json.dump`` writes them as arrays).

May import: ``cbench.files`` and ``cbench.errors`` only (graphs are passed in, duck-typed).
"""

from cbench.schemas.documents import MAX_INT_BITS, _walk, check, validate
from cbench.schemas.graph_documents import GRAPH_KINDS, check_against_graph
from cbench.schemas.json_files import FileReport, loads, read_json, validate_file
from cbench.schemas.messages import Violation, format_path
from cbench.schemas.registry import (DEFS_FILE, MAX_DEPTH, MAX_JSON_BYTES, SCHEMA_BASE_URI, SCHEMA_KINDS,
                                     SCHEMA_VERSION, SIZE_GRID, _kind_name, _validator, bundled_schema, kind_of,
                                     load_schema, schema_id, schema_registry)

__all__ = ["DEFS_FILE", "GRAPH_KINDS", "MAX_DEPTH", "MAX_INT_BITS", "MAX_JSON_BYTES", "SCHEMA_BASE_URI",
           "SCHEMA_KINDS", "SCHEMA_VERSION", "SIZE_GRID", "FileReport", "Violation", "check", "check_against_graph",
           "format_path", "kind_of", "load_schema", "loads", "read_json", "schema_id", "validate", "validate_file",
           "bundled_schema", "schema_registry",
           "_kind_name", "_validator", "_walk"]
