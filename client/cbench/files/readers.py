"""Reading the data files a user names (parquet, safetensors, JSON): one line naming the file and
what is wrong with it, never a library's traceback.

Each reader first takes the file's bytes through :func:`cbench.files.safe_io.read_regular_file`
(a regular file, bounded, a FIFO cannot hang it), then parses them, turning whatever the parser
raises (pyarrow's ``ArrowInvalid``, safetensors' ``SafetensorError``, a ``JSONDecodeError``) into
``error`` (default :class:`~cbench.errors.ArtifactError`) with the file's path in the message.
:func:`read_parquet_rows` also names the columns a file lacks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from cbench.errors import ArtifactError, CbenchError
from cbench.files.safe_io import read_regular_file

#: the largest data file cbench reads whole (a counterfactuals split, a checkpoint)
MAX_DATA_BYTES = 4 << 30
MAX_JSON_BYTES = 256 << 20


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def read_parquet_rows(path: str | os.PathLike, columns: Sequence[str] = (), *, what: str = "a parquet file",
                      error: type[CbenchError] = ArtifactError, limit: int = MAX_DATA_BYTES) -> list[dict]:
    """The rows of a parquet file as dicts; ``error`` naming the file when it is not a readable
    parquet file or lacks one of ``columns``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = read_regular_file(path, limit, what, error)
    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ... for a broken file
        raise error(f"{path}: not a readable parquet file ({_first_line(exc)})") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise error(f"{path}: no column {', '.join(repr(c) for c in missing)} (it has: "
                    f"{', '.join(table.column_names) or 'none'}); is it {what}?")
    try:
        return table.to_pylist()
    except Exception as exc:  # noqa: BLE001 - a column pyarrow cannot turn into Python values
        raise error(f"{path}: cannot read its rows ({_first_line(exc)})") from None


def read_safetensors(path: str | os.PathLike, *, what: str = "a safetensors file",
                     error: type[CbenchError] = ArtifactError, limit: int = MAX_DATA_BYTES) -> dict:
    """The tensors of a safetensors file (torch, on the CPU); ``error`` naming the file when it is
    empty, truncated or not a safetensors file."""
    from safetensors.torch import load

    data = read_regular_file(path, limit, what, error)
    if not data:
        raise error(f"{path}: empty file, not {what}")
    try:
        return load(data)
    except Exception as exc:  # noqa: BLE001 - SafetensorError, ValueError, RuntimeError for a broken file
        raise error(f"{path}: not {what} ({_first_line(exc)})") from None


def read_json_file(path: str | os.PathLike, *, what: str = "a JSON file", error: type[CbenchError] = ArtifactError,
                   limit: int = MAX_JSON_BYTES) -> Any:
    """The document in a JSON file; ``error`` naming the file (and the line and column) when it is
    not UTF-8 JSON."""
    data = read_regular_file(path, limit, what, error)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path}: not {what} (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not {what} ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise error(f"{path}: not {what} ({_first_line(exc)})") from None
