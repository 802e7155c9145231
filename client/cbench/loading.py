"""``cbench.load`` and ``cbench.load_dataset``: artifacts at an exact revision, online or offline.

Both go through :func:`cbench.pull.pull` (which answers from the cache when offline or when the
revision is already cached), then read the local snapshot:

* :func:`load` returns a :class:`~cbench.artifacts.ModelArtifact` (``.load_model()`` builds the
  HookedTransformer);
* :func:`load_dataset` calls ``datasets.load_dataset(<snapshot path>, config)``. Passing the
  local path, not the repository id, is deliberate: offline, ``datasets.load_dataset(repo,
  revision=...)`` silently ignores the revision (datasets issue 7928); a snapshot directory is
  one exact revision.
"""

from __future__ import annotations

import os

from cbench.errors import CbenchError, UsageError


def load(case: str, revision: str | None = None, *, endpoint: str | None = None,
         hub: str | os.PathLike | None = None, offline: bool | None = None, verify: bool = True):
    """The model artifact of ``case`` (``'case-3'``, ``'tracr-case-3'``, ``'cbench/case-3@v1.0.0'``)."""
    from cbench.artifacts import read_model_artifact
    from cbench.pull import pull

    snap = pull(case, revision, repo_type="model", endpoint=endpoint, hub=hub, offline=offline)
    return read_model_artifact(snap.path, verify=verify)


def load_dataset(name: str, config: str | None = None, revision: str | None = None, *,
                 endpoint: str | None = None, hub: str | os.PathLike | None = None,
                 offline: bool | None = None, **kwargs):
    """``datasets.load_dataset`` on a cbench dataset (``'counterfactuals'`` or ``'org/name'``) at
    an exact revision (a version tag or a commit sha; default the newest version)."""
    from cbench.pull import pull

    snap = pull(name, revision, repo_type="dataset", endpoint=endpoint, hub=hub, offline=offline)
    import datasets

    try:
        return datasets.load_dataset(str(snap.path), config, **kwargs)
    except ValueError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {msg}") from None
    except (FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as exc:  # type: ignore[attr-defined]
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {exc}") from None
