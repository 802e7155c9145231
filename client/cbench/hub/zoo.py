"""The model zoo of this source tree: its released artifacts by repository and version, and
their recorded release dates (``model_zoo/releases``; ``$CBENCH_ZOO`` overrides where it is).
"""

from __future__ import annotations

import contextvars
import os
from pathlib import Path

from cbench.hub.repos import _TYPE_DIRS, RepoRef, is_version

# set by cbench.hub.loading.snapshots_checked_once: the listings read in that block, by zoo directory
LISTED_ONCE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("cbench_zoo_listed", default=None)

RELEASE_DATES_FILE = "release-dates.json"


def release_dates(zoo: Path | None = None) -> dict[str, str]:
    """``model_zoo/releases/release-dates.json``: ``"<models|datasets>/<org>/<name>/<vX.Y.Z>"`` ->
    the ISO 8601 date the release was committed to the zoo ({} when absent)."""
    import json

    zoo = zoo if zoo is not None else zoo_dir()
    if zoo is None:
        return {}
    try:
        data = json.loads((Path(zoo) / "releases" / RELEASE_DATES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def release_key(ref: "RepoRef", version: str) -> str:
    return f"{_TYPE_DIRS[ref.repo_type]}/{ref.repo_id}/{version}"


def zoo_dir() -> Path | None:
    """The ``model_zoo`` of this source tree (``$CBENCH_ZOO`` overrides), or None if absent."""
    env = os.environ.get("CBENCH_ZOO")
    if env:
        return Path(env).expanduser()
    here = Path(__file__).resolve().parents[1]  # client/cbench
    for candidate in (here.parent.parent / "model_zoo", here.parent / "model_zoo"):
        if candidate.is_dir():
            return candidate
    return None


def zoo_releases(zoo: Path | None = None) -> dict[RepoRef, dict[str, Path]]:
    """``model_zoo/releases/{models,datasets}/<org>/<name>/<vX.Y.Z>/``: repo -> version -> dir (read
    once per zoo inside a bench's block, :func:`cbench.hub.loading.snapshots_checked_once`)."""
    zoo = zoo if zoo is not None else zoo_dir()
    if zoo is None:
        return {}
    listed = LISTED_ONCE.get()
    if listed is not None:
        if Path(zoo) not in listed:
            listed[Path(zoo)] = _list_releases(Path(zoo))
        return {ref: dict(versions) for ref, versions in listed[Path(zoo)].items()}
    return _list_releases(Path(zoo))


def _list_releases(zoo: Path) -> dict[RepoRef, dict[str, Path]]:
    out: dict[RepoRef, dict[str, Path]] = {}
    base = Path(zoo) / "releases"
    for repo_type, type_dir in _TYPE_DIRS.items():
        tdir = base / type_dir
        if not tdir.is_dir():
            continue
        for org in sorted(p for p in tdir.iterdir() if p.is_dir()):
            for name in sorted(p for p in org.iterdir() if p.is_dir()):
                versions = {v.name: v for v in name.iterdir() if v.is_dir() and is_version(v.name)}
                if versions:
                    out[RepoRef(f"{org.name}/{name.name}", repo_type)] = versions
    return out


