"""A hub: a directory of git repositories in Hugging Face layout, and publishing into it.

Layout (what olah's ``mirrors-path`` expects, see :mod:`cbench.hub_server`)::

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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from cbench.errors import HubError, PublishError, UsageError

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


def check_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UsageError(f"{repo_id!r} is not a repository name; use <org>/<name>, e.g. cbench/case-3")
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
def release_problems(directory: str | os.PathLike, repo_type: str = "model") -> list[str]:
    """Everything wrong with a release directory (empty list: publishable).

    Every ``*.json`` must parse; every one with a ``schema`` field must satisfy its schema (each
    violation with its JSON path); a model directory must also pass
    :func:`cbench.artifacts.verify_artifact` (manifest hashes, required files, config).
    """
    from cbench.errors import CbenchError
    from cbench.validation import read_json, validate

    root = Path(directory)
    if not root.is_dir():
        return [f"{directory}: not a directory"]
    files = list(_release_files(root))
    if not files:
        return [f"{directory}: empty directory, nothing to publish"]
    problems: list[str] = []
    for rel in files:
        problem = _olah_unservable(root / rel)
        if problem:
            problems.append(f"{rel}: {problem}")
        if not rel.endswith(".json"):
            continue
        try:
            doc = read_json(root / rel)
        except CbenchError as exc:
            problems.append(str(exc))
            continue
        if isinstance(doc, dict) and "schema" in doc:
            problems += [f"{rel}: {v}" for v in validate(doc)]
    if repo_type == "model" and not problems:
        from cbench.artifacts import verify_artifact

        try:
            verify_artifact(root)
        except CbenchError as exc:
            problems.append(str(exc))
    return problems


def _olah_unservable(path: Path) -> str | None:
    """olah 0.5.4 sniffs every blob of 121-149 bytes for a Git LFS pointer by decoding it as UTF-8:
    a binary file of that size makes its tree listing and downloads fail (HTTP 500)."""
    size = path.stat().st_size
    if 120 < size < 150:
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return (f"a binary file of {size} bytes; the local hub server (olah) cannot serve non-UTF-8 files "
                    "of 121-149 bytes (it sniffs them for Git LFS pointers), so pad or re-encode it")
    return None


def _release_files(root: Path) -> Iterable[str]:
    """Relative paths (posix) of the files to publish, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_NAMES)
        for f in filenames:
            if f in _SKIP_NAMES:
                continue
            full = Path(dirpath) / f
            if full.is_file():
                out.append(full.relative_to(root).as_posix())
    return sorted(out)


# ---------------------------------------------------------------------------- publishing
@dataclass(frozen=True)
class PublishResult:
    repo_id: str
    repo_type: str
    version: str
    commit: str
    target: str  # hub directory or endpoint URL

    def describe(self) -> str:
        return f"published {self.repo_id} {self.version} ({self.repo_type}) at {self.commit} to {self.target}"


def publish(directory: str | os.PathLike, repo_id: str, repo_type: str = "model", version: str = "v1.0.0",
            hub: str | os.PathLike | None = None, token: str | None = None,
            date: str | int | None = None) -> PublishResult:
    """Validate ``directory`` and publish it as ``version`` of ``repo_id`` to ``hub``.

    ``hub`` is a hub directory (default: :func:`default_hub_dir`) or an ``http(s)://`` endpoint.
    Refuses (PublishError) on any schema violation, a reused tag, or a version lower than the
    newest one; a refusal leaves the repository untouched. ``date`` is the release date (ISO
    8601 or Unix seconds) of the commit and tag (see :func:`release_timestamp`).
    """
    check_repo_id(repo_id)
    check_repo_type(repo_type)
    parse_version(version)
    timestamp = release_timestamp(version, date)
    if hub is not None and str(hub).startswith(("http://", "https://")):
        from cbench.pull import check_endpoint

        hub = check_endpoint(str(hub), "--hub")
    elif hub is not None:
        hp = Path(hub).expanduser()
        if not str(hub).strip():
            raise UsageError("--hub is empty; give a hub directory or an http(s):// URL")
        if (hp.exists() or hp.is_symlink()) and not hp.is_dir():
            raise UsageError(f"--hub {hp} is not a directory; give a hub directory (created if missing) or an "
                             "http(s):// URL")
    problems = release_problems(directory, repo_type)
    if problems:
        raise PublishError(f"refusing to publish {directory} as {repo_id} {version}: "
                           f"{len(problems)} problem(s)\n  " + "\n  ".join(problems[:50]))
    src = Path(directory).expanduser().resolve()  # git runs in the repository: paths must be absolute
    if hub is not None and str(hub).startswith(("http://", "https://")):
        return _publish_http(src, repo_id, repo_type, version, str(hub), token)
    hub_dir = Path(hub).expanduser().resolve() if hub is not None else default_hub_dir().resolve()
    return _publish_local(src, repo_id, repo_type, version, Hub(hub_dir), timestamp)


def _check_new_version(repo_id: str, version: str, existing: Iterable[str]) -> None:
    existing = list(existing)
    if version in existing:
        raise PublishError(f"{repo_id} already has {version}; versions are immutable, publish a higher one "
                           f"(newest is {sort_versions(existing)[-1]})")
    versions = sort_versions(existing)
    if versions and parse_version(version) < parse_version(versions[-1]):
        raise PublishError(f"{version} is lower than {repo_id}'s newest version {versions[-1]}; "
                           f"publish a version above it")


def _publish_local(src: Path, repo_id: str, repo_type: str, version: str, hub: Hub,
                   timestamp: int | None = None) -> PublishResult:
    from filelock import FileLock

    hub.root.mkdir(parents=True, exist_ok=True)
    lock_dir = hub.root / ".locks"
    lock_dir.mkdir(exist_ok=True)
    final = hub.repo_path(repo_id, repo_type)
    with FileLock(str(lock_dir / f"{repo_type}--{repo_id.replace('/', '--')}.lock")):
        new_repo = not (final / ".git").exists()
        if not new_repo:
            _check_new_version(repo_id, version, hub.refs(repo_id, repo_type))
        with tempfile.TemporaryDirectory(prefix=".publish-", dir=hub.root) as tmp:
            tmp = Path(tmp)
            repo = final
            if new_repo:
                if final.exists() and any(final.iterdir()):
                    raise PublishError(f"{final} exists and is not a git repository; move it away first")
                repo = tmp / "repo"
                repo.mkdir()
                git(repo, "init", "-q", "-b", "main")
            commit = _commit_tree(repo, src, repo_id, version, tmp / "index", timestamp)
            if new_repo:
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists():
                    final.rmdir()
                os.replace(repo, final)
            # bring the working tree in line with the new commit (olah reads git objects, but a
            # non-bare hub repo should show its newest version)
            git(final, "reset", "-q", "--hard", "refs/heads/main")
    return PublishResult(repo_id, repo_type, version, commit, str(hub.root))


def _commit_tree(repo: Path, src: Path, repo_id: str, version: str, index: Path, timestamp: int | None = None) -> str:
    """Write ``src``'s files as one commit on ``main`` plus annotated tag ``version``; return the
    commit sha. Objects go in first; refs move last, in one transaction."""
    timestamp = timestamp if timestamp is not None else version_timestamp(version)
    env = _git_env(version, timestamp)
    files = list(_release_files(src))
    # hash every file into the object store
    paths = "\n".join(str(src / f) for f in files).encode() + b"\n"
    shas = git(repo, "hash-object", "-w", "--stdin-paths", "--no-filters", env=env, input=paths).split()
    if len(shas) != len(files):
        raise PublishError(f"git stored {len(shas)} of {len(files)} files from {src}")
    info = "".join(f"{'100755' if os.access(src / f, os.X_OK) else '100644'} {sha}\t{f}\n"
                   for f, sha in zip(files, shas)).encode()
    idx_env = dict(env, GIT_INDEX_FILE=str(index))
    git(repo, "update-index", "--add", "--index-info", env=idx_env, input=info)
    tree = git(repo, "write-tree", env=idx_env)
    parent = git(repo, "rev-parse", "-q", "--verify", "refs/heads/main^{commit}", env=env, check=False)
    args = ["commit-tree", tree, "-m", f"Release {repo_id} {version}"]
    if parent:
        args += ["-p", parent]
    commit = git(repo, *args, env=env)
    stamp = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}> {timestamp} +0000"
    tag_obj = git(repo, "mktag", env=env, input=(
        f"object {commit}\ntype commit\ntag {version}\ntagger {stamp}\n\n{repo_id} {version}\n").encode())
    old = parent or "0" * 40
    txn = (f"start\nupdate refs/heads/main {commit} {old}\ncreate refs/tags/{version} {tag_obj}\n"
           "prepare\ncommit\n").encode()
    proc = subprocess.run(["git", "-C", str(repo), "update-ref", "--stdin"], input=txn, capture_output=True,
                          env=env)
    if proc.returncode != 0:
        raise PublishError(f"{repo_id} changed while publishing {version} "
                           f"({proc.stderr.decode(errors='replace').strip()}); nothing was published, try again")
    return commit


def _publish_http(src: Path, repo_id: str, repo_type: str, version: str, endpoint: str,
                  token: str | None) -> PublishResult:
    """Publish through the Hugging Face Hub API (huggingface.co or a compatible server)."""
    from urllib.parse import urlparse

    if urlparse(endpoint).hostname not in ("huggingface.co", "hf.co"):
        # Xet storage exists only on huggingface.co; anything else takes plain HTTP uploads
        os.environ["HF_HUB_DISABLE_XET"] = "1"
        try:
            import huggingface_hub.constants as hf_constants

            hf_constants.HF_HUB_DISABLE_XET = True
        except Exception:  # pragma: no cover
            pass
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, repo_type=repo_type, exist_ok=True)
        refs = api.list_repo_refs(repo_id, repo_type=repo_type)
        _check_new_version(repo_id, version, [t.name for t in refs.tags])
        commit = api.upload_folder(folder_path=str(src), repo_id=repo_id, repo_type=repo_type,
                                   commit_message=f"Release {repo_id} {version}",
                                   ignore_patterns=[f"**/{n}/**" for n in _SKIP_NAMES] + list(_SKIP_NAMES))
        api.create_tag(repo_id, tag=version, tag_message=f"{repo_id} {version}", revision=commit.oid,
                       repo_type=repo_type)
    except HfHubHTTPError as exc:
        raise PublishError(f"publishing {repo_id} {version} to {endpoint} failed: {str(exc).splitlines()[0]}") from None
    except PublishError:
        raise
    except Exception as exc:  # noqa: BLE001 - connection errors of the HTTP stack (httpx, requests, OSError)
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise PublishError(f"cannot reach {endpoint} to publish {repo_id} ({type(exc).__name__}"
                           f"{': ' + detail if detail else ''}); nothing was published") from None
    return PublishResult(repo_id, repo_type, version, commit.oid, endpoint)


# ---------------------------------------------------------------------------- default hub and seeding
def cbench_home() -> Path:
    """``$CBENCH_HOME`` (default ``~/.cache/cbench``): the default hub and the client's cache."""
    return Path(os.environ.get("CBENCH_HOME") or Path.home() / ".cache" / "cbench").expanduser()


def default_hub_dir() -> Path:
    return cbench_home() / "hub"


def zoo_dir() -> Path | None:
    """The ``model_zoo`` of this source tree (``$CBENCH_ZOO`` overrides), or None if absent."""
    env = os.environ.get("CBENCH_ZOO")
    if env:
        return Path(env).expanduser()
    here = Path(__file__).resolve().parent  # client/cbench
    for candidate in (here.parent.parent / "model_zoo", here.parent / "model_zoo"):
        if candidate.is_dir():
            return candidate
    return None


def zoo_releases(zoo: Path | None = None) -> dict[RepoRef, dict[str, Path]]:
    """``model_zoo/releases/{models,datasets}/<org>/<name>/<vX.Y.Z>/``: repo -> version -> dir."""
    zoo = zoo if zoo is not None else zoo_dir()
    out: dict[RepoRef, dict[str, Path]] = {}
    if zoo is None:
        return out
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


def ensure_seeded(hub_dir: str | os.PathLike | None = None, zoo: Path | None = None,
                  only: Iterable[RepoRef] | None = None) -> list[PublishResult]:
    """Publish every zoo release the hub lacks, oldest version first per repository; with
    ``only``, just the releases of those repositories (lazy seeding: a command seeds what it
    needs, so the first ``cbench pull case-3`` on a fresh home publishes one repository, not the
    whole zoo).

    Each version is published with its recorded release date (:func:`release_dates`). Cheap when
    there is nothing to do (a stamp file records a full seeding; a lazy one compares the
    repository's tags). Safe when several processes seed at once (a file lock; the second finds
    the work done). A zoo version lower than what the hub already has is skipped, not an error.
    """
    import json

    hub = Hub(hub_dir if hub_dir is not None else default_hub_dir())
    releases = zoo_releases(zoo)
    if not releases:
        return []
    stamp = hub.root / ".seeded.json"
    wanted = {ref.key: sorted(vs) for ref, vs in releases.items()}
    try:
        if json.loads(stamp.read_text()) == wanted:
            return []
    except (OSError, ValueError):
        pass
    if only is not None:
        keys = {r.key for r in only}
        releases = {ref: vs for ref, vs in releases.items() if ref.key in keys}
        if all(set(vs) <= set(hub.refs(ref.repo_id, ref.repo_type)) for ref, vs in releases.items()):
            return []
    from filelock import FileLock

    dates = release_dates(zoo)
    hub.root.mkdir(parents=True, exist_ok=True)
    done: list[PublishResult] = []
    with FileLock(str(hub.root / ".seed.lock")):
        for ref, versions in releases.items():
            have = set(hub.refs(ref.repo_id, ref.repo_type))
            newest = sort_versions(have)[-1] if have else None
            for version in sort_versions(versions):
                if version in have or (newest and parse_version(version) < parse_version(newest)):
                    continue
                done.append(publish(versions[version], ref.repo_id, ref.repo_type, version, hub=hub.root,
                                    date=dates.get(release_key(ref, version))))
                newest = version
        if only is None:
            tmp = stamp.with_suffix(".tmp")
            tmp.write_text(json.dumps(wanted, sort_keys=True))
            os.replace(tmp, stamp)
    return done


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
