"""A user's counterfactual pairs from a file: the EAP-IG library's CSV layout, the same fields as
JSONL, a Parquet file, or a Hugging Face dataset saved with ``save_to_disk`` (a directory).

Fields (columns or JSON keys): ``clean`` and ``corrupted`` (texts), and optionally the answers at
the last position, either as token ids (``correct_idx``, ``incorrect_idx``, as in EAP-IG's IOI
file) or as strings (``correct``, ``incorrect``, each one token as written). Other fields are
ignored. Rows are numbered from 1 (the first pair; a CSV's header is not a row). Each row is
checked as :func:`cbench.tasks.text_pairs.pairs_to_task_data` says, and a bad row or an unreadable
file is one :class:`~cbench.errors.UsageError` naming the file and the row.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Iterable, Mapping

from cbench.errors import UsageError
from cbench.tasks.text_pairs import TextPair, pairs_to_task_data

ID_FIELDS = ("correct_idx", "incorrect_idx")
TEXT_FIELDS = ("correct", "incorrect")
LAYOUT = "clean, corrupted[, correct_idx, incorrect_idx | correct, incorrect]"


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _jsonl_rows(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{path.name}: line {n}: not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise UsageError(f"{path.name}: line {n}: a row must be a JSON object with {LAYOUT}")
            rows.append(row)
    return rows


def _arrow_rows(path: Path) -> list[dict]:
    if path.is_dir():
        from datasets import DatasetDict, load_from_disk

        ds = load_from_disk(str(path))
        if isinstance(ds, DatasetDict):
            raise UsageError(f"{path.name}: a dataset with splits {sorted(ds)}; give one split's directory")
        return list(ds)
    import pyarrow.parquet as pq

    return pq.read_table(str(path)).to_pylist()


def read_rows(path: str | os.PathLike) -> list[dict]:
    """The rows of ``path`` as dicts, by its kind (``.jsonl``/``.json`` lines, ``.parquet``, a
    ``save_to_disk`` directory, else CSV)."""
    p = Path(path)
    suffix = p.suffix.lower()
    try:
        if suffix in (".jsonl", ".json", ".ndjson"):
            return _jsonl_rows(p)
        if p.is_dir() or suffix == ".parquet":
            return _arrow_rows(p)
        return _csv_rows(p)
    except UsageError:
        raise
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    except Exception as e:  # noqa: BLE001 - pyarrow/datasets raise their own kinds on a bad file
        raise UsageError(f"cannot read {path} as a dataset: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def rows_to_pairs(rows: Iterable[Mapping], name: str) -> list[TextPair]:
    """Rows with the fields above as :class:`TextPair` (ids read as ints; strings kept)."""
    rows = list(rows)
    if not rows:
        raise UsageError(f"{name}: no rows (needs {LAYOUT})")
    keys = set(rows[0])
    if not {"clean", "corrupted"} <= keys:
        raise UsageError(f"{name}: needs fields clean and corrupted (and optionally correct_idx, incorrect_idx or "
                         f"correct, incorrect); has {', '.join(sorted(map(str, keys))) or 'none'}")
    ids, texts = set(ID_FIELDS) & keys, set(TEXT_FIELDS) & keys
    if ids and texts:
        raise UsageError(f"{name}: give the answers as ids (correct_idx, incorrect_idx) or as strings "
                         f"(correct, incorrect), not both")
    fields = ID_FIELDS if ids else TEXT_FIELDS if texts else None
    pairs = []
    for n, row in enumerate(rows, start=1):
        where = f"row {n}"
        if "clean" not in row or "corrupted" not in row:
            raise UsageError(f"{name}: {where}: needs clean and corrupted")
        correct = incorrect = None
        if fields is not None:
            correct, incorrect = row.get(fields[0]), row.get(fields[1])
            if fields is ID_FIELDS:
                correct, incorrect = (_as_id(v, f, name, where) for v, f in zip((correct, incorrect), fields))
            else:
                for v, f in zip((correct, incorrect), fields):
                    if v is None or v == "":
                        raise UsageError(f"{name}: {where}: {f} is empty (an answer is one token)")
                    if not isinstance(v, str):
                        raise UsageError(f"{name}: {where}: {f} must be a string (got {v!r}; ids go in {f}_idx)")
        clean, corrupted = row["clean"], row["corrupted"]
        if not isinstance(clean, str) or not isinstance(corrupted, str):
            raise UsageError(f"{name}: {where}: clean and corrupted must be texts")
        pairs.append(TextPair(clean, corrupted, correct, incorrect, where))
    return pairs


def _as_id(v, field: str, name: str, where: str) -> int:
    if v is None or v == "":
        raise UsageError(f"{name}: {where}: {field} is empty (an answer is one token id)")
    if isinstance(v, bool):
        raise UsageError(f"{name}: {where}: {field} must be a token id (got {v!r})")
    try:
        f = float(v)
        i = int(f)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name}: {where}: {field} must be a token id (got {v!r})") from None
    if f != i:
        raise UsageError(f"{name}: {where}: {field} must be a whole token id (got {v!r})")
    return i


def read_pairs_file(path: str | os.PathLike, tokenizer, n_examples: int | None = None, *,
                    vocab_size: int | None = None):
    """The pairs of ``path`` as :class:`~cbench.tasks.data.TaskData` (the first ``n_examples``)."""
    name = Path(str(path).rstrip("/")).name or str(path)
    if not Path(path).exists():
        raise UsageError(f"{path}: no such file or directory (pairs: {LAYOUT}; or a task: ioi, mcqa, arithmetic, arc)")
    rows = read_rows(path)
    if n_examples is not None:
        rows = rows[:n_examples]
    pairs = rows_to_pairs(rows, name)
    return pairs_to_task_data(pairs, tokenizer, name, vocab_size=vocab_size, split="file", dataset=name)
