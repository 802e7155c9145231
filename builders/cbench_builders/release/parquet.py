"""Deterministic parquet writing for released datasets.

Same table in, same bytes out: zstd at a fixed level, a fixed row-group size, dictionary
encoding, statistics, no timestamps (pyarrow writes none; the only writer string is
``created_by``, fixed by the pyarrow version), schema metadata only from the caller (sorted
JSON). Written to a temporary file beside the target and renamed, so an interrupted build never
leaves a half-written file where a good one was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP_SIZE = 16_384
ZSTD_LEVEL = 9


def write_parquet(table: pa.Table, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(
            table, tmp,
            row_group_size=ROW_GROUP_SIZE,
            compression="zstd",
            compression_level=ZSTD_LEVEL,
            use_dictionary=True,
            write_statistics=True,
            version="2.6",
            data_page_version="1.0",
            store_schema=True,
        )
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def read_metadata(path: Path) -> dict[bytes, bytes]:
    """The schema's key-value metadata of a parquet file (without reading the data)."""
    return dict(pq.read_schema(path).metadata or {})
