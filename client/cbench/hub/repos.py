"""A hub: a directory of git repositories in Hugging Face layout, and publishing into it.

Layout (what olah's ``mirrors-path`` expects, see :mod:`cbench.hub.server`)::

    <hub>/models/<org>/<name>/      non-bare git repo, branch ``main``, one tag per version
    <hub>/datasets/<org>/<name>/

The hub directory itself is what olah calls a mirrors path: olah looks repositories up at
``<mirrors-path>/<repo_type>/<org>/<name>``. DESIGN.md's ``mirrors/{models,datasets}/...`` is the
same thing with the hub directory named ``mirrors``.

Publishing (:func:`publish`) validates a release directory, then writes one commit whose tree is
exactly the directory's files and an annotated tag ``vX.Y.Z``. Commits are deterministic: author,
committer and tagger are fixed and their dates derive from the version, so the same content
published the same way (same history, same date) gives the same commit and tag shas. The date
is the release's: ``publish(..., date=...)`` (``cbench publish --date``), which the default hub's
seeding takes from ``model_zoo/releases/release-dates.json`` (the time each release was committed
to the zoo, recorded once, so every rebuild of the hub gives the same shas); without one it is a
fixed date derived from the version (:func:`version_timestamp`, in 2024, never in the future). The commit is built in
a temporary index and the branch and tag are moved in one ``git update-ref`` transaction, so a
refusal or a failure leaves the repository as it was. A URL target goes through
``HfApi.upload_folder`` + ``create_tag`` instead.

The default hub (:func:`default_hub_dir`) is a per-user directory, seeded on first use from the
released artifacts kept in ``model_zoo/releases/{models,datasets}/<org>/<name>/<vX.Y.Z>/``
(:func:`ensure_seeded`).

This module imports only the standard library at the top: ``cbench info`` goes through it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from cbench.errors import HubError, UsageError

REPO_TYPES = ("model", "dataset")
_TYPE_DIRS = {"model": "models", "dataset": "datasets"}
_VERSION_RE = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")

# fixed identity of every commit and tag cbench writes (dates come from the version)
AUTHOR_NAME = "cbench release"
AUTHOR_EMAIL = "release@cbench.invalid"
_EPOCH = 1_704_067_200  # 2024-01-01T00:00:00Z
# files never published from a release directory
_SKIP_NAMES = {".git", ".cache", "__pycache__", ".DS_Store", ".ipynb_checkpoints"}


# ---------------------------------------------------------------------------- versions
def parse_version(tag: str) -> tuple[int, int, int]:
    """``'v1.2.3'`` -> ``(1, 2, 3)``; UsageError for anything else."""
    m = _VERSION_RE.match(tag) if isinstance(tag, str) else None
    if not m:
        raise UsageError(f"{tag!r} is not a version; versions look like v1.0.0 (vMAJOR.MINOR.PATCH)")
    return int(m[1]), int(m[2]), int(m[3])


def is_version(tag: str) -> bool:
    return isinstance(tag, str) and _VERSION_RE.match(tag) is not None


def sort_versions(tags: Iterable[str]) -> list[str]:
    """The version tags among ``tags``, oldest first (other tags are dropped)."""
    return sorted((t for t in tags if is_version(t)), key=parse_version)


def version_timestamp(version: str) -> int:
    """The fallback commit date (Unix seconds) of a version with no release date: increasing with
    the version, in 2024 for every version below v3 (never in the future)."""
    major, minor, patch = parse_version(version)
    if minor >= 1000 or patch >= 1000:
        raise UsageError(f"{version}: cbench versions keep MINOR and PATCH below 1000")
    return _EPOCH + major * 10_000_000 + minor * 10_000 + patch * 10


def release_timestamp(version: str, date: str | int | None = None) -> int:
    """The commit date of a release: ``date`` (ISO 8601 such as ``2026-11-22T01:48:37Z``, or Unix
    seconds) when given, else :func:`version_timestamp`."""
    if date is None:
        return version_timestamp(version)
    if isinstance(date, int) and not isinstance(date, bool):
        return date
    from datetime import datetime, timezone

    try:
        d = datetime.fromisoformat(str(date).replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{date!r} is not a date; give ISO 8601, e.g. 2026-11-22T01:48:37Z") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return int(d.timestamp())








def check_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UsageError(f"{repo_id!r} is not a repository name; use <org>/<name>, e.g. cbench/case-3")
    # the Hugging Face Hub's rules: no "--" (the cache's models--org--name would be ambiguous), no
    # part ending in "-" or ".", no name ending in ".git" (a git URL, not a repository id)
    if "--" in repo_id or any(part.endswith(("-", ".")) for part in repo_id.split("/")):
        raise UsageError(f"{repo_id!r} is not a repository name: no '--', and no part may end in '-' or '.'")
    if repo_id.lower().endswith(".git"):
        raise UsageError(f"{repo_id!r} is not a repository name: it ends in '.git' (a git URL); "
                         f"use {repo_id[:-4]!r}")
    return repo_id


def check_repo_type(repo_type: str) -> str:
    if repo_type not in REPO_TYPES:
        raise UsageError(f"repository type {repo_type!r} is not one of: {', '.join(REPO_TYPES)}")
    return repo_type


# ---------------------------------------------------------------------------- git
def _git_env(version: str | None = None, timestamp: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # the user's git configuration (signing, hooks, templates) must not change what we write
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
                "LC_ALL": "C"})
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(k, None)
    if version is not None:
        date = f"{timestamp if timestamp is not None else version_timestamp(version)} +0000"
        env.update({"GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL, "GIT_AUTHOR_DATE": date,
                    "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
                    "GIT_COMMITTER_DATE": date})
    return env


def git(repo: Path, *args: str, env: dict | None = None, input: bytes | None = None,
        check: bool = True) -> str:
    """Run ``git -C repo args``; return stdout (stripped). HubError with git's message on failure."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                              env=env or _git_env())
    except FileNotFoundError:
        raise HubError("git is not installed; cbench's local hub needs it (apt-get install git)") from None
    if check and proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise HubError(f"git {args[0]} failed in {repo}: {msg[-1] if msg else 'exit ' + str(proc.returncode)}")
    return proc.stdout.decode(errors="replace").strip()


# ---------------------------------------------------------------------------- the hub directory
@dataclass(frozen=True)
class RepoRef:
    """One repository of a hub: ``repo_type`` is ``model`` or ``dataset``."""

    repo_id: str
    repo_type: str = "model"

    @property
    def key(self) -> str:
        return f"{self.repo_type}:{self.repo_id}"

    def __str__(self) -> str:
        return self.repo_id if self.repo_type == "model" else f"{self.repo_id} (dataset)"


class Hub:
    """A hub directory: list repositories, read their tags, resolve revisions to commit shas.

    Reading needs no server: olah serves the very same git repositories.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"Hub({str(self.root)!r})"

    def exists(self) -> bool:
        return self.root.is_dir()

    def repo_path(self, repo_id: str, repo_type: str = "model") -> Path:
        check_repo_type(repo_type)
        org, name = check_repo_id(repo_id).split("/")
        return self.root / _TYPE_DIRS[repo_type] / org / name

    def has_repo(self, repo_id: str, repo_type: str = "model") -> bool:
        try:
            return (self.repo_path(repo_id, repo_type) / ".git").exists()
        except UsageError:
            return False

    def repos(self, repo_type: str = "model") -> list[str]:
        """Every ``org/name`` of that type, sorted."""
        base = self.root / _TYPE_DIRS[check_repo_type(repo_type)]
        out = []
        if base.is_dir():
            for org in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
                for repo in sorted(p for p in org.iterdir() if p.is_dir() and not p.name.startswith(".")):
                    if (repo / ".git").exists():
                        out.append(f"{org.name}/{repo.name}")
        return out

    def refs(self, repo_id: str, repo_type: str = "model") -> dict[str, str]:
        """Tag name -> commit sha (annotated tags peeled)."""
        path = self.repo_path(repo_id, repo_type)
        if not (path / ".git").exists():
            return {}
        out = git(path, "for-each-ref", "--format=%(refname:strip=2) %(objectname) %(*objectname)", "refs/tags")
        tags = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                tags[parts[0]] = parts[2] if len(parts) > 2 else parts[1]
        return tags

    def branches(self, repo_id: str, repo_type: str = "model") -> dict[str, str]:
        """Branch name -> commit sha (``main``)."""
        path = self.repo_path(repo_id, repo_type)
        if not (path / ".git").exists():
            return {}
        out = git(path, "for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads")
        return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

    def versions(self, repo_id: str, repo_type: str = "model") -> list[str]:
        """Version tags, oldest first."""
        return sort_versions(self.refs(repo_id, repo_type))

    def has_commit(self, repo_id: str, sha: str, repo_type: str = "model") -> bool:
        path = self.repo_path(repo_id, repo_type)
        return bool(SHA_RE.match(sha)) and subprocess.run(
            ["git", "-C", str(path), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True,
            env=_git_env()).returncode == 0

    def read_file(self, repo_id: str, revision: str, path: str, repo_type: str = "model") -> bytes | None:
        """A file's bytes at a revision (None if absent)."""
        proc = subprocess.run(["git", "-C", str(self.repo_path(repo_id, repo_type)), "cat-file", "blob",
                               f"{revision}:{path}"], capture_output=True, env=_git_env())
        return proc.stdout if proc.returncode == 0 else None


# ---------------------------------------------------------------------------- validating a release






# ---------------------------------------------------------------------------- publishing












# ---------------------------------------------------------------------------- default hub and seeding
def cbench_home() -> Path:
    """``$CBENCH_HOME`` (default ``~/.cache/cbench``): the default hub and the client's cache.

    UsageError (one line) when it names something other than a directory (or nothing yet), or a
    directory of the kernel's virtual file systems (``/proc``, ``/sys``, ``/dev``)."""
    set_to = os.environ.get("CBENCH_HOME")
    home = Path(set_to or Path.home() / ".cache" / "cbench").expanduser()
    if set_to:
        _check_home(home)
    return home


def _check_home(home: Path) -> None:
    import stat

    from cbench.files.safe_io import describe_mode

    if "\0" in str(home):
        raise UsageError("CBENCH_HOME contains a NUL byte")
    resolved = Path(os.path.realpath(home))
    if any(resolved == Path(v) or Path(v) in resolved.parents for v in ("/proc", "/sys")):
        raise UsageError(f"CBENCH_HOME={home} is in {resolved.parts[0]}{resolved.parts[1]}, a virtual file system; "
                         "point it at an ordinary directory (or unset it for ~/.cache/cbench)")
    try:
        st = os.stat(home)
    except FileNotFoundError:
        return  # made on first use
    except OSError as exc:
        raise UsageError(f"CBENCH_HOME={home}: cannot use it ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"CBENCH_HOME={home} is {describe_mode(st.st_mode)}, not a directory; point it at a "
                         "directory (or unset it for ~/.cache/cbench)")


def default_hub_dir() -> Path:
    return cbench_home() / "hub"








def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
