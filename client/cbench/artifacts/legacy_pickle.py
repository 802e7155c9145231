"""A restricted unpickler for legacy pickles (InterpBench's ``ll_model_cfg.pkl``, ``edges.pkl``).

A pickle is a program: every ``GLOBAL``/``STACK_GLOBAL`` opcode names a callable that the
unpickler imports and may call (``os.system`` in a malicious one), and ``BUILD`` hands attacker-made
state to an object's ``__setstate__`` (numpy's dtype crashes on bad state). This module runs its
own opcode loop (the pure-Python ``pickle._Unpickler`` with three opcodes replaced) so that:

* **globals come from an allowlist only** (:meth:`RestrictedUnpickler.find_class`), and every
  allowed name resolves to a cbench function or a *spec* object, never a native type that
  pickle could call ``__setstate__`` on:

  - plain containers and numbers: ``builtins`` ``set``, ``frozenset``, ``list``, ``dict``,
    ``tuple``, ``int``, ``float``, ``complex``, ``bool``, ``str``; ``bytes``/``bytearray`` only
    from bytes (never ``bytes(10**12)``); ``collections.OrderedDict``;
  - torch dtypes (``torch.float32`` ...) and ``torch.device`` (from a string such as ``cpu`` or
    ``cuda:0``, checked by pattern) as :class:`TorchDtype` / :class:`TorchDevice` specs;
  - numpy dtypes (``numpy.dtype``) as a :class:`NumpyDtype` spec whose ``BUILD`` state is read as
    values (only the byte order is used); numpy scalars (``numpy.(_)core.multiarray.scalar``)
    from a plain-number dtype and exactly ``itemsize`` bytes;
  - ``HookedTransformerConfig`` (any ``transformer_lens`` path): a stand-in
    (:class:`PickledConfig`) that only records the pickled field values; the real class's code
    never runs and callers get a plain dict;
  - ``copyreg._reconstructor`` only for that stand-in, ``_codecs.encode`` only to make bytes from
    a latin-1 string (what protocols 0-2 write);
* ``BUILD`` is allowed only on those two stand-ins; on anything else it is refused;
* frames must fit in the pickle, the memo holds at most :data:`MAX_MEMO` entries, and the result
  may have at most :data:`MAX_NODES` values nested at most :data:`MAX_DEPTH` deep (a pickle that
  references one list from two places ``n`` times over would otherwise expand to 2**n values).

Anything else raises :class:`~cbench.errors.UnsafePickleError` (a refused global) or
:class:`~cbench.errors.ArtifactError` (not a readable pickle), one line naming the file.

:func:`load` (a file; what ``cbench import-interpbench`` uses) does the unpickling in a child
process with a memory and time limit. The child sends back plain values (JSON with tags for
tuples, bytes, dtypes ...), which the parent rebuilds from validated values. So even a crash in a
native library cannot take cbench down: a child killed by a signal becomes one line
("the unpickler crashed (SIGSEGV) reading FILE; refused, nothing was imported"). :func:`loads`
runs the same code in this process (tests, trusted callers).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import pickle
import re
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from cbench.errors import ArtifactError, CbenchError, UnsafePickleError

MAX_PICKLE_BYTES = 64 * 1024 * 1024
MAX_MEMO = 1_000_000
MAX_NODES = 2_000_000
MAX_DEPTH = 200
CHILD_TIMEOUT_S = 120.0
CHILD_MEMORY_BYTES = 3 * 1024 ** 3

_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}
_CONFIG_NAMES = frozenset({"HookedTransformerConfig"})
_PLAIN_BUILTINS = frozenset({"set", "frozenset", "list", "dict", "tuple", "int", "float", "complex", "bool", "str"})
TORCH_DTYPES = frozenset({
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "complex64", "cfloat", "complex128",
    "cdouble", "uint8", "int8", "int16", "short", "int32", "int", "int64", "long", "bool", "uint16", "uint32",
    "uint64", "float8_e4m3fn", "float8_e5m2"})
_DEVICE_RE = re.compile(r"^(cpu|cuda|mps|meta|xpu)(:\d{1,4})?$")
_NUMPY_DTYPE_RE = re.compile(r"^[<>|=]?(b1|\?|[iu][1248]|f[248]|c(8|16)|bool|(u?int|float|complex)(8|16|32|64|128)?"
                             r"|float16|half|single|double|longlong|ulonglong)$")


# ---------------------------------------------------------------------------- the allowed objects
class PickledConfig:
    """Stand-in for a pickled config object: holds its field values, runs no code of its own."""

    def __init__(self) -> None:
        self.fields: dict = {}

    def set_state(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
            state = {**(state[0] or {}), **(state[1] or {})}  # (dict state, slot state)
        if not isinstance(state, dict):
            raise UnsafePickleError(f"a pickled config carries a {type(state).__name__} state, not field values")
        self.fields.update({str(k): v for k, v in state.items()})


class TorchDtype:
    """``torch.<name>`` as pickled; rebuilt as the real dtype by :func:`decode`."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class TorchDevice:
    def __init__(self, spec: str):
        self.spec = spec


class NumpyDtype:
    """``numpy.dtype(code, align, copy)`` plus its BUILD state, as validated values."""

    def __init__(self, code: str):
        self.code = code
        self.byteorder = "="

    def set_state(self, state: Any) -> None:
        # numpy writes (version, byteorder, subarray, names, fields, elsize, alignment, flags)
        if not (isinstance(state, tuple) and len(state) >= 2 and isinstance(state[1], str)
                and state[1] in ("<", ">", "|", "=")):
            raise UnsafePickleError("the pickle gives a numpy dtype a state that is not a plain byte order")
        if any(s not in (None, -1, 0) for s in state[2:5]):
            raise UnsafePickleError("the pickle asks for a structured or sub-array numpy dtype, which cbench "
                                    "does not load")
        self.byteorder = state[1]

    def numpy(self):
        import numpy as np

        dt = np.dtype(self.code)
        if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
            raise UnsafePickleError(f"numpy dtype {self.code!r} is not a plain number type")
        return dt.newbyteorder(self.byteorder) if self.byteorder in "<>" and dt.itemsize > 1 else dt

    @property
    def wire(self) -> str:
        return self.numpy().str


class NumpyScalar:
    def __init__(self, dtype: str, data: bytes):
        self.dtype = dtype
        self.data = data


class _ObjectBase:
    """What ``builtins.object`` resolves to: usable only as _reconstructor's base argument."""


def _config_factory(*args, **kwargs):
    if args or kwargs:
        raise UnsafePickleError("the pickle calls HookedTransformerConfig with arguments; cbench reads only "
                                "its field values")
    return PickledConfig()


_config_factory.__new__ = lambda cls, *a: PickledConfig()  # NEWOBJ: cls.__new__(cls, *args)


def _safe_reconstructor(cls, base, state):
    if cls is not _config_factory or base is not _ObjectBase or state is not None:
        raise UnsafePickleError("the pickle rebuilds an object through copyreg._reconstructor, "
                                "which cbench allows only for HookedTransformerConfig")
    return PickledConfig()


def _latin1_bytes(text, encoding="latin1", errors="strict"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise UnsafePickleError("the pickle calls _codecs.encode other than to make bytes")
    return text.encode("latin1")


def _bytes_from(kind):
    def make(*args):
        if not args:
            return kind()
        if len(args) == 1 and isinstance(args[0], (bytes, bytearray)):
            return kind(args[0])
        if len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
            return kind(args[0].encode("latin1"))
        raise UnsafePickleError(f"the pickle calls {kind.__name__} other than on bytes")
    return make


def _torch_device(*args):
    if len(args) == 1 and isinstance(args[0], str) and _DEVICE_RE.match(args[0]):
        return TorchDevice(args[0])
    if (len(args) == 2 and isinstance(args[0], str) and _DEVICE_RE.match(args[0]) and ":" not in args[0]
            and type(args[1]) is int and 0 <= args[1] < 10_000):
        return TorchDevice(f"{args[0]}:{args[1]}")
    raise UnsafePickleError(f"the pickle asks for torch.device{args!r:.60}, which is not a device name "
                            "such as 'cpu' or 'cuda:0'")


def _numpy_dtype(*args):
    code = args[0] if args else None
    if not (isinstance(code, str) and _NUMPY_DTYPE_RE.match(code)) or any(type(a) is not bool for a in args[1:3]) \
            or len(args) > 3:
        raise UnsafePickleError(f"the pickle asks for numpy dtype {code!r:.40}, which is not a plain number type")
    spec = NumpyDtype(code)
    spec.numpy()
    return spec


def _numpy_scalar(dtype=None, data=None):
    if not isinstance(dtype, NumpyDtype) or not isinstance(data, (bytes, bytearray)):
        raise UnsafePickleError("the pickle builds a numpy scalar that is not a plain number")
    dt = dtype.numpy()
    if len(data) != dt.itemsize:
        raise UnsafePickleError(f"the pickle builds a numpy {dt} scalar from {len(data)} bytes, not {dt.itemsize}")
    return NumpyScalar(dt.str, bytes(data))


# ---------------------------------------------------------------------------- the unpickler
_Base = pickle._Unpickler  # the pure-Python opcode loop: every opcode handler is ours to replace


class RestrictedUnpickler(_Base):
    """``pickle`` opcode loop that resolves globals from the allowlist, allows ``BUILD`` only on
    cbench's stand-ins, and bounds frames and the memo."""

    dispatch = dict(_Base.dispatch)

    def __init__(self, file, source: str = "pickle", size: int | None = None):
        super().__init__(file)
        self.source = source
        self.size = size

    def find_class(self, module: str, name: str) -> Any:  # noqa: C901 - one table of cases
        module = _PY2_MODULES.get(module, module)  # protocol 0-2 pickles name Python 2 modules
        if module == "builtins":
            if name in _PLAIN_BUILTINS:
                import builtins

                return getattr(builtins, name)
            if name in ("bytes", "bytearray"):
                return _bytes_from(bytes if name == "bytes" else bytearray)
            if name == "object":
                return _ObjectBase
        if module == "collections" and name == "OrderedDict":
            import collections

            return collections.OrderedDict
        if module == "copyreg" and name == "_reconstructor":
            return _safe_reconstructor
        if module == "_codecs" and name == "encode":
            return _latin1_bytes
        if module == "torch":
            if name == "device":
                return _torch_device
            if name in TORCH_DTYPES:
                return TorchDtype(name)
        if module == "numpy" and name == "dtype":
            return _numpy_dtype
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name == "scalar":
            return _numpy_scalar
        if (module == "transformer_lens" or module.startswith("transformer_lens.")) and name in _CONFIG_NAMES:
            return _config_factory
        what = f"{module}.{name}"
        if not re.match(r"^[\w.<>]{1,200}$", what):
            what = repr(what)[:200]
        raise UnsafePickleError(
            f"{self.source}: refused: the pickle asks for {what}, which cbench does not load "
            "(allowed: plain containers, numbers, strings, torch dtypes, numpy scalars and a "
            "HookedTransformerConfig's field values); nothing in it was run")

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self.source}: refused: the pickle uses persistent ids (not plain data)")

    # ---- replaced opcodes
    def _load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, (PickledConfig, NumpyDtype)):
            inst.set_state(state)
            return
        raise UnsafePickleError(f"{self.source}: refused: the pickle sets the state of a {type(inst).__name__} "
                                "(BUILD), which cbench allows only for a config's field values and a numpy "
                                "dtype's byte order")

    def _load_frame(self):
        (frame_size,) = struct.unpack("<Q", self.read(8))
        if self.size is not None and frame_size > self.size:
            raise pickle.UnpicklingError(f"a frame of {frame_size} bytes in a pickle of {self.size}")
        self._unframer.load_frame(frame_size)

    def _memo_checked(handler):
        def run(self):
            handler(self)
            if len(self.memo) > MAX_MEMO:
                raise pickle.UnpicklingError(f"more than {MAX_MEMO} memo entries")
        return run

    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.FRAME[0]] = _load_frame
    for _op in (pickle.PUT, pickle.BINPUT, pickle.LONG_BINPUT, pickle.MEMOIZE):
        dispatch[_op[0]] = _memo_checked(_Base.dispatch[_op[0]])
    del _op, _memo_checked


# ---------------------------------------------------------------------------- plain values on the wire
def encode(obj: Any) -> Any:
    """The unpickled object as JSON-able values: lists, strings, numbers, None, and tagged objects
    ``{"~": tag, ...}`` for tuples, non-string-keyed dicts, bytes, sets, dtypes, devices, scalars.
    Bounded: at most :data:`MAX_NODES` values and :data:`MAX_DEPTH` levels."""
    budget = [MAX_NODES]

    def enc(x: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ArtifactError(f"it holds more than {MAX_NODES} values (or references one value from too "
                                "many places)")
        if depth > MAX_DEPTH:
            raise ArtifactError(f"it nests values more than {MAX_DEPTH} levels deep")
        t = type(x)
        if x is None or t in (bool, str):
            return x
        if t is int:
            return x if abs(x) < 1 << 63 else {"~": "int", "v": format(x, "x")}
        if t is float:
            return x if math.isfinite(x) else {"~": "float", "v": repr(x)}
        if t is complex:
            return {"~": "complex", "v": [enc(x.real, depth + 1), enc(x.imag, depth + 1)]}
        if t in (bytes, bytearray):
            return {"~": t.__name__, "v": base64.b64encode(bytes(x)).decode("ascii")}
        if t is list:
            return [enc(v, depth + 1) for v in x]
        if t is tuple:
            return {"~": "tuple", "v": [enc(v, depth + 1) for v in x]}
        if t in (set, frozenset):
            return {"~": t.__name__, "v": [enc(v, depth + 1) for v in x]}
        if isinstance(x, dict) and t.__name__ in ("dict", "OrderedDict"):
            return {"~": "dict", "v": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
        if t is PickledConfig:
            return {"~": "dict", "v": [[k, enc(v, depth + 1)] for k, v in x.fields.items()]}
        if t is TorchDtype:
            return {"~": "torch.dtype", "v": x.name}
        if t is TorchDevice:
            return {"~": "torch.device", "v": x.spec}
        if t is NumpyDtype:
            return {"~": "numpy.dtype", "v": x.wire}
        if t is NumpyScalar:
            return {"~": "numpy.scalar", "dtype": x.dtype, "v": base64.b64encode(x.data).decode("ascii")}
        raise ArtifactError(f"it holds a {t.__name__}, which is not plain data")

    return enc(obj, 0)


def decode(doc: Any) -> Any:
    """Rebuild values from :func:`encode`'s form; dtypes, devices and scalars are made here from
    validated names and bytes (never through ``__setstate__``)."""
    if isinstance(doc, list):
        return [decode(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    tag, v = doc.get("~"), doc.get("v")
    if tag == "tuple":
        return tuple(decode(x) for x in v)
    if tag == "dict":
        return {decode(k): decode(x) for k, x in v}
    if tag in ("set", "frozenset"):
        return (set if tag == "set" else frozenset)(decode(x) for x in v)
    if tag in ("bytes", "bytearray"):
        data = base64.b64decode(v)
        return data if tag == "bytes" else bytearray(data)
    if tag == "int":
        return int(v, 16)
    if tag == "float":
        return float(v)
    if tag == "complex":
        return complex(decode(v[0]), decode(v[1]))
    if tag == "torch.dtype" and v in TORCH_DTYPES:
        import torch

        return getattr(torch, v)
    if tag == "torch.device" and isinstance(v, str) and _DEVICE_RE.match(v):
        import torch

        return torch.device(v)
    if tag == "numpy.dtype" and isinstance(v, str) and _NUMPY_DTYPE_RE.match(v):
        import numpy as np

        return np.dtype(v)
    if tag == "numpy.scalar" and isinstance(doc.get("dtype"), str) and _NUMPY_DTYPE_RE.match(doc["dtype"]):
        import numpy as np

        dt = np.dtype(doc["dtype"])
        data = base64.b64decode(v)
        if dt.hasobject or len(data) != dt.itemsize:
            raise ArtifactError("a numpy scalar came back malformed from the unpickler")
        return np.frombuffer(data, dtype=dt, count=1)[0]
    raise ArtifactError(f"the unpickler sent back an unknown value {tag!r:.40}")


def _unpickle_to_wire(data: bytes, source: str) -> Any:
    """Unpickle and encode; every failure an UnsafePickleError or ArtifactError naming ``source``."""
    try:
        obj = RestrictedUnpickler(io.BytesIO(data), source, size=len(data)).load()
        return encode(obj)
    except UnsafePickleError as exc:
        msg = str(exc)
        raise UnsafePickleError(msg if msg.startswith(source) else f"{source}: refused: {msg}; nothing in it "
                                "was run") from None
    except ArtifactError as exc:
        raise ArtifactError(f"{source}: not loaded: {exc}") from None
    except MemoryError:
        raise ArtifactError(f"{source}: not a readable pickle (it needs more memory than cbench allows)") from None
    except RecursionError:
        raise ArtifactError(f"{source}: not a readable pickle (nested too deeply)") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, LookupError, OverflowError,
            struct.error, UnicodeError) as exc:  # what a malformed pickle makes the opcode loop raise
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise ArtifactError(f"{source}: not a readable pickle ({type(exc).__name__}"
                            f"{': ' + detail if detail else ''})") from None


def loads(data: bytes, source: str = "pickle") -> Any:
    """Unpickle ``data`` through :class:`RestrictedUnpickler` in this process; config objects become
    dicts, dtypes and scalars are rebuilt from validated values."""
    return decode(_unpickle_to_wire(bytes(data), source))


def read_limited(path: str | os.PathLike, limit: int = MAX_PICKLE_BYTES) -> bytes:
    from cbench.files.safe_io import read_regular_file

    return read_regular_file(path, limit, what="a legacy pickle")


def load(path: str | os.PathLike) -> Any:
    """Read a legacy pickle file through the restricted unpickler, in a child process."""
    p = Path(path)
    data = read_limited(p)
    return loads_isolated(data, str(p))


def loads_isolated(data: bytes, source: str = "pickle", timeout: float = CHILD_TIMEOUT_S) -> Any:
    """:func:`loads` in a child process (memory and time limited); a crash becomes one message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_"))}
    env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _CHILD, source, _client_root()], input=data,
                              capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"{source}: refused: unpickling it took more than {timeout:.0f} s; nothing was "
                            "imported") from None
    except OSError as exc:
        raise ArtifactError(f"{source}: cannot start the unpickler ({exc.strerror or exc})") from None
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise UnsafePickleError(f"{source}: refused: the unpickler crashed ({sig}) reading it; nothing was "
                                "imported")
    try:
        reply = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        reply = None
    if not isinstance(reply, dict):
        tail = proc.stderr.decode(errors="replace").strip().splitlines()
        raise ArtifactError(f"{source}: the unpickler failed (exit {proc.returncode}"
                            f"{': ' + tail[-1][:200] if tail else ''}); nothing was imported")
    if "error" in reply:
        cls = UnsafePickleError if reply.get("kind") == "unsafe" else ArtifactError
        raise cls(str(reply["error"]))
    return decode(reply.get("value"))


def _client_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # the directory holding the cbench package


def child_main(source: str) -> int:
    """The child's side: pickle bytes on stdin, one JSON object on stdout."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not on every platform
        pass
    data = sys.stdin.buffer.read()
    try:
        reply = {"value": _unpickle_to_wire(data, source)}
    except UnsafePickleError as exc:
        reply = {"error": str(exc), "kind": "unsafe"}
    except CbenchError as exc:
        reply = {"error": str(exc), "kind": "unreadable"}
    sys.stdout.write(json.dumps(reply, allow_nan=False))
    sys.stdout.flush()
    return 0


# -I (isolated) drops the user's site and PYTHONPATH; the client's directory is put back explicitly
_CHILD = ("import sys; sys.path.insert(0, sys.argv[2]); "
          "from cbench.artifacts.legacy_pickle import child_main; sys.exit(child_main(sys.argv[1]))")
