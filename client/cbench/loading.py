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
    return open_dataset(snap, config, **kwargs)


def datasets_cache_dir() -> "os.PathLike":
    """Where the datasets library keeps its Arrow cache for cbench: ``$CBENCH_HOME/datasets``."""
    from cbench.hub import cbench_home

    return cbench_home() / "datasets"


def open_dataset(snap, config: str | None = None, **kwargs):
    """``datasets.load_dataset`` on a verified snapshot. The Arrow cache lives under CBENCH_HOME, one
    directory per snapshot commit (never ``~/.cache/huggingface``; a re-downloaded snapshot gets a
    fresh one)."""
    cache_dir = datasets_cache_dir() / f"{snap.repo_id.replace('/', '--')}--{snap.sha}"
    os.environ.setdefault("HF_DATASETS_CACHE", str(datasets_cache_dir()))  # before datasets is imported
    import datasets

    kwargs.setdefault("cache_dir", str(cache_dir))
    try:
        return datasets.load_dataset(str(snap.path), config, **kwargs)
    except ValueError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {msg}") from None
    except (FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as exc:  # type: ignore[attr-defined]
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged parquet file, an arrow error: one line
        msg = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: cannot read the dataset "
                          f"({type(exc).__name__}{': ' + msg if msg else ''})") from None


def dataset_splits(path) -> dict[str, list[str]]:
    """``config -> [split, ...]`` from a dataset card's ``configs:`` front matter (README.md)."""
    from pathlib import Path

    readme = Path(path) / "README.md"
    try:
        text = readme.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    import yaml

    try:
        front = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}
    out: dict[str, list[str]] = {}
    for cfg in (front or {}).get("configs") or [] if isinstance(front, dict) else []:
        if not isinstance(cfg, dict) or not isinstance(cfg.get("config_name"), str):
            continue
        files = cfg.get("data_files")
        if isinstance(files, list):
            splits = [f.get("split") for f in files if isinstance(f, dict) and isinstance(f.get("split"), str)]
        elif isinstance(files, dict):
            splits = [k for k in files if isinstance(k, str)]
        else:
            splits = ["train"]
        out[cfg["config_name"]] = splits or ["train"]
    return out
