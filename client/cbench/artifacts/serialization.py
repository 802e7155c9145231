"""The bytes of an artifact: canonical JSON (sorted keys, indent 2, trailing newline), atomic
writes, sha256 digests, the list of an artifact's files, and safetensors serialised
deterministically (tensors sorted by name, header JSON with sorted keys) and its header read
without loading tensors.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Mapping

from cbench.errors import (
    ArtifactError,
    ArtifactSchemaError,
    SchemaError,
)

if TYPE_CHECKING:  # pragma: no cover
    import torch


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes as 64 lower-case hex characters."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ArtifactError(f"{path}: is a directory, not a file") from None
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read it ({e.strerror or e})") from None
    return h.hexdigest()


def dumps_json(doc: Any) -> bytes:
    """cbench's deterministic JSON bytes: sorted keys, indent 2, UTF-8, trailing newline.

    NaN and Infinity are refused (they are not JSON)."""
    try:
        text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise ArtifactError(f"cannot write JSON: {e}") from None
    except TypeError as e:
        raise ArtifactError(f"cannot write JSON: {e}") from None
    return (text + "\n").encode("utf-8")


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    """One place that writes a file cbench was asked to write: :func:`cbench.files.safe_io.write_output`."""
    from cbench.files.safe_io import write_output

    write_output(path, data, option="output")


def write_json(path: str | os.PathLike, doc: Any) -> Path:
    """Write ``doc`` as deterministic JSON (:func:`dumps_json`) through :func:`cbench.files.safe_io.write_output`
    (new or regular files only; atomic)."""
    path = Path(path)
    _write_bytes_atomic(path, dumps_json(doc))
    return path


def _read_json(path: Path) -> Any:
    """Parse a JSON file with cbench.schemas's rules; bad files become ArtifactError."""
    from cbench.schemas import read_json

    try:
        return read_json(path)
    except SchemaError as e:  # its message starts with the path
        raise ArtifactError(str(e).split("\n", 1)[0]) from None


def _check_doc(doc: Any, kind: str, source: str) -> None:
    from cbench.schemas import check

    try:
        check(doc, kind, source=source)
    except ArtifactSchemaError:
        raise
    except SchemaError as e:
        raise ArtifactSchemaError(str(e).split("\n", 1)[0], e.violations) from None


def _is_hidden(rel: PurePosixPath) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def artifact_files(root: str | os.PathLike) -> list[str]:
    """Relative POSIX paths of every regular file under ``root`` (following file symlinks, as in a
    Hugging Face snapshot), dotfiles and dot-directories excluded, sorted."""
    root = Path(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            full = Path(dirpath) / name
            rel = PurePosixPath(full.relative_to(root).as_posix())
            if full.is_file():
                out.append(str(rel))
            else:
                raise ArtifactError(f"{full}: not a regular file (broken link or special file)")
    return sorted(out)


_ST_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}


def _safetensors_bytes(tensors: Mapping[str, "torch.Tensor"], metadata: Mapping[str, str]) -> bytes:
    """Serialise tensors in the safetensors format, deterministically.

    Format: 8-byte little-endian header length N, N bytes of JSON header (padded with spaces
    to a multiple of 8), then the tensors' bytes back to back. Tensors are placed in name order;
    the header has sorted keys and no spaces. Readers do not depend on either order.
    """
    import torch

    header: dict[str, Any] = {"__metadata__": {str(k): str(v) for k, v in sorted(metadata.items())}}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(t, torch.Tensor):
            raise ArtifactError(f"weight {name!r} is not a tensor")
        dt = _ST_DTYPES.get(str(t.dtype).removeprefix("torch."))
        if dt is None:
            raise ArtifactError(f"weight {name!r} has dtype {t.dtype}, which cbench does not store")
        t = t.detach().to("cpu").contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    head += b" " * ((8 - len(head) % 8) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def read_safetensors_header(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor table and ``__metadata__``), without torch."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                raise ArtifactError(f"{path}: not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", raw)
            size = os.fstat(fh.fileno()).st_size
            if n > min(size - 8, 100 * 1024 * 1024):
                raise ArtifactError(f"{path}: not a safetensors file (header length {n} is impossible)")
            head = fh.read(n)
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ArtifactError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ArtifactError(f"{path}: not a safetensors file (its header is not a JSON object)")
    return header


