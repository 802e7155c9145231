"""cbench: a hub of mechanistic-interpretability benchmark artifacts with a thin client.

The top level stays light (no torch import) so ``cbench info`` answers fast; heavy routines
are imported where they are used.
"""

from __future__ import annotations

__version__ = "0.1.0"

DEFAULT_ORG = "cbench"


def load(case: str, revision: str | None = None, **kwargs):
    """Load a case's model from the hub or the offline cache (see :func:`cbench.hub_client.load`)."""
    from cbench.loading import load as _load

    return _load(case, revision=revision, **kwargs)


def load_dataset(name: str, config: str | None = None, revision: str | None = None, **kwargs):
    """``datasets.load_dataset`` on a cbench dataset at an exact revision, online or offline."""
    from cbench.loading import load_dataset as _load_dataset

    return _load_dataset(name, config, revision=revision, **kwargs)
