"""cbench: mechanistic-interpretability benchmark artifacts with known circuits, and the tools to
run and score circuit-discovery methods on them.

One call per job, each returning a typed result (reference: docs/python-api.md)::

    import cbench

    cbench.pull("case-3")                                  # PullResult: path, revision, commit
    found = cbench.discover("case-3", "eap", n_examples=100)   # DiscoveryResult: edge scores, circuit
    cbench.score("case-3", found).edge_auroc               # ScoreResult: AUROC against the ground truth
    cbench.evaluate(found).cpr                             # EvaluationResult: CPR, CMD

``cbench.load`` gives a case's model artifact (``.load_model()`` builds the HookedTransformer),
``cbench.load_dataset`` a dataset at an exact revision; ``cbench.bench``, ``cbench.verify`` and
``cbench.validate`` do what the commands of those names do; ``cbench.register_method`` adds your
own discovery method (docs/new-method.md).

The top level stays light (no torch import): the API's functions are imported on first use.
"""

from __future__ import annotations

from cbench.about import (  # noqa: F401
    DEFAULT_ORG,
    MOVED_MODULES,
    MovedModuleFinder,
    __version__,
    moved_attributes,
)

#: the Python API, imported from :mod:`cbench.api` when first used
_API = ("pull", "discover", "score", "evaluate", "bench", "verify", "validate", "register_method",
        "unregister_method", "methods", "PullResult", "DiscoveryResult", "ScoreResult", "EvaluationResult",
        "BenchResult", "VerifyResult", "ValidationResult")

__all__ = [
    "BenchResult",
    "DiscoveryResult",
    "EvaluationResult",
    "PullResult",
    "ScoreResult",
    "ValidationResult",
    "VerifyResult",
    "__version__",
    "bench",
    "discover",
    "evaluate",
    "load",
    "load_dataset",
    "methods",
    "pull",
    "register_method",
    "score",
    "unregister_method",
    "validate",
    "verify",
]


def load(case: str, revision: str | None = None, **kwargs):
    """A case's model artifact, from the hub or the offline cache: a
    :class:`cbench.artifacts.model.ModelArtifact` whose ``.load_model()`` builds the
    HookedTransformer (see :func:`cbench.hub.loading.load` for the keyword arguments).

    >>> model = cbench.load("case-3").load_model()                    # doctest: +SKIP
    """
    from cbench.hub.loading import load as _load

    return _load(case, revision=revision, **kwargs)


def load_dataset(name: str, config: str | None = None, revision: str | None = None, **kwargs):
    """``datasets.load_dataset`` on a cbench dataset at an exact revision, online or offline (see
    :func:`cbench.hub.loading.load_dataset`).

    >>> cbench.load_dataset("counterfactuals", "case-3")["validation"]   # doctest: +SKIP
    """
    from cbench.hub.loading import load_dataset as _load_dataset

    return _load_dataset(name, config, revision=revision, **kwargs)


def __getattr__(name: str):
    if name in _API:
        import cbench.api as _api

        value = getattr(_api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cbench' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))


import sys as _sys
import types as _types


class _Package(_types.ModuleType):
    """The ``cbench`` module, whose API names are not replaced by old module paths.

    ``import cbench.pull`` (the old path of :mod:`cbench.hub.pull`, kept with a DeprecationWarning)
    would otherwise set the attribute ``cbench.pull`` to that module, hiding :func:`cbench.pull`;
    the module stays reachable as ``sys.modules["cbench.pull"]`` and by ``from cbench.pull import ...``."""

    def __setattr__(self, name, value):
        if name in _API and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

if not any(isinstance(f, MovedModuleFinder) and f.moved is MOVED_MODULES for f in _sys.meta_path):
    _sys.meta_path.append(MovedModuleFinder(MOVED_MODULES))
