"""A restricted unpickler for legacy pickles (InterpBench's ``ll_model_cfg.pkl``, ``edges.pkl``).

A pickle is a program: every ``GLOBAL``/``STACK_GLOBAL`` opcode names a callable that the
unpickler imports and may call (``os.system`` in a malicious one). :class:`RestrictedUnpickler`
overrides ``find_class``, the one place those names are resolved, and answers only from an
allowlist:

* plain containers and numbers: ``builtins`` ``set``, ``frozenset``, ``list``, ``dict``, ``tuple``,
  ``int``, ``float``, ``complex``, ``bool``, ``str``, ``bytes``, ``bytearray``;
  ``collections.OrderedDict`` (lists, dicts, tuples, strings and numbers need no global at all);
* torch dtypes (``torch.float32`` ...) and ``torch.device`` (built from its string);
* numpy scalars and dtypes: ``numpy.dtype`` and ``numpy.(_)core.multiarray.scalar``, through
  wrappers that refuse object dtypes (so a scalar cannot smuggle an object in);
* ``HookedTransformerConfig`` (any ``transformer_lens`` module path): **not** the real class; a
  stand-in (:class:`PickledConfig`) that only records the pickled field values. The real class's
  code (``__post_init__``, which reseeds random generators, or any ``__setstate__``) never runs,
  and the values inside went through this same allowlist; callers get a plain dict.
* ``copyreg._reconstructor`` (protocol 0/1 objects) only for that stand-in, and
  ``_codecs.encode`` only as protocol 0/1 use it (a latin-1 string to bytes).

Anything else raises :class:`~cbench.errors.UnsafePickleError` naming the ``module.name`` it
asked for, before anything is called: nothing in a refused pickle runs.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

from cbench.errors import ArtifactError, UnsafePickleError

_BUILTINS = frozenset({"set", "frozenset", "list", "dict", "tuple", "int", "float", "complex", "bool", "str",
                       "bytes", "bytearray"})
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}
_CONFIG_NAMES = frozenset({"HookedTransformerConfig"})
MAX_PICKLE_BYTES = 64 * 1024 * 1024


class PickledConfig:
    """Stand-in for a pickled config object: holds its field values, runs no code of its own."""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.__dict__["fields"] = {}
        return obj

    def __init__(self, *args, **kwargs):  # never called by pickle; here for completeness
        pass

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
            state = {**(state[0] or {}), **(state[1] or {})}
        if not isinstance(state, dict):
            raise UnsafePickleError(f"a pickled config carries a {type(state).__name__} state, not field values")
        self.__dict__["fields"].update({str(k): v for k, v in state.items()})


class _ObjectBase:
    """What ``builtins.object`` resolves to: usable only as _reconstructor's base argument."""


def _safe_reconstructor(cls, base, state):
    if cls is not PickledConfig or base is not _ObjectBase or state is not None:
        raise UnsafePickleError("the pickle rebuilds an object through copyreg._reconstructor, "
                                "which cbench allows only for HookedTransformerConfig")
    return PickledConfig.__new__(PickledConfig)


def _latin1_bytes(text, encoding="latin1", errors="strict"):
    """What protocol 0/1 pickles use for bytes: ``_codecs.encode(str, 'latin1')``, nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise UnsafePickleError("the pickle calls _codecs.encode other than to make bytes")
    return text.encode("latin1")


def _numpy_dtype(*args):
    import numpy as np

    dt = np.dtype(*args)
    if dt.hasobject:
        raise UnsafePickleError("the pickle asks for a numpy object dtype, which cbench does not load")
    return dt


def _numpy_scalar(dtype, data=None):
    import numpy as np

    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, (bytes, bytearray)):
        raise UnsafePickleError("the pickle builds a numpy scalar that is not a plain number")
    return np.frombuffer(bytes(data), dtype=dtype, count=1)[0]


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves globals only from the allowlist above."""

    def __init__(self, file, source: str = "pickle"):
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:  # noqa: C901 - one table of cases
        module = _PY2_MODULES.get(module, module)  # protocol 0-2 pickles name Python 2 modules
        if module == "builtins" and name in _BUILTINS:
            import builtins

            return getattr(builtins, name)
        if module == "builtins" and name == "object":
            return _ObjectBase
        if module == "collections" and name == "OrderedDict":
            import collections

            return collections.OrderedDict
        if module == "copyreg" and name == "_reconstructor":
            return _safe_reconstructor
        if module == "_codecs" and name == "encode":
            return _latin1_bytes
        if module == "torch":
            import torch

            if name == "device":
                return torch.device
            attr = getattr(torch, name, None) if not name.startswith("_") else None
            if isinstance(attr, torch.dtype):
                return attr
        if module == "numpy" and name == "dtype":
            return _numpy_dtype
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name == "scalar":
            return _numpy_scalar
        if (module == "transformer_lens" or module.startswith("transformer_lens.")) and name in _CONFIG_NAMES:
            return PickledConfig
        raise UnsafePickleError(
            f"{self.source}: refused: the pickle asks for {module}.{name}, which cbench does not load "
            "(allowed: plain containers, numbers, strings, torch dtypes, numpy scalars and a "
            "HookedTransformerConfig's field values); nothing in it was run")

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self.source}: refused: the pickle uses persistent ids (not plain data)")


def loads(data: bytes, source: str = "pickle") -> Any:
    """Unpickle ``data`` through :class:`RestrictedUnpickler`; config objects become dicts."""
    try:
        obj = RestrictedUnpickler(io.BytesIO(data), source).load()
    except UnsafePickleError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, RecursionError) as exc:
        raise ArtifactError(f"{source}: not a readable pickle ({type(exc).__name__}: {exc})") from None
    return _plain(obj)


def load(path: str | os.PathLike) -> Any:
    """Read a legacy pickle file through the restricted unpickler."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise ArtifactError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    if size > MAX_PICKLE_BYTES:
        raise ArtifactError(f"{p}: {size} bytes is larger than cbench reads for a legacy pickle")
    return loads(p.read_bytes(), str(p))


def _plain(obj: Any) -> Any:
    if isinstance(obj, PickledConfig):
        return {k: _plain(v) for k, v in obj.__dict__["fields"].items()}
    if isinstance(obj, dict):
        return type(obj)((k, _plain(v)) for k, v in obj.items()) if type(obj) is not dict else \
            {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_plain(v) for v in obj)
    return obj
