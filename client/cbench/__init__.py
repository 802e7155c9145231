"""cbench: a hub of mechanistic-interpretability benchmark artifacts with a thin client.

The top level stays light (no torch import) so ``cbench info`` answers fast; heavy routines
are imported where they are used.
"""

from __future__ import annotations

from cbench.about import DEFAULT_ORG, MOVED_MODULES, MovedModuleFinder, __version__, moved_attributes  # noqa: F401


def load(case: str, revision: str | None = None, **kwargs):
    """Load a case's model from the hub or the offline cache (see :func:`cbench.hub.loading.load`)."""
    from cbench.hub.loading import load as _load

    return _load(case, revision=revision, **kwargs)


def load_dataset(name: str, config: str | None = None, revision: str | None = None, **kwargs):
    """``datasets.load_dataset`` on a cbench dataset at an exact revision, online or offline."""
    from cbench.hub.loading import load_dataset as _load_dataset

    return _load_dataset(name, config, revision=revision, **kwargs)


import sys as _sys  # noqa: E402

if not any(isinstance(f, MovedModuleFinder) and f.moved is MOVED_MODULES for f in _sys.meta_path):
    _sys.meta_path.append(MovedModuleFinder(MOVED_MODULES))
