"""Publishing a release directory into a hub: validate it (every JSON document against its schema;
a model directory as an artifact), then write one commit and one version tag (a local hub
directory through git, or an HTTP endpoint through huggingface_hub). A refusal leaves the
repository untouched.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from cbench.errors import PublishError, UsageError
from cbench.hub.repos import (
    _SKIP_NAMES,
    AUTHOR_EMAIL,
    AUTHOR_NAME,
    Hub,
    _git_env,
    check_repo_id,
    check_repo_type,
    default_hub_dir,
    git,
    parse_version,
    release_timestamp,
    sort_versions,
    version_timestamp,
)


def release_problems(directory: str | os.PathLike, repo_type: str = "model") -> list[str]:
    """Everything wrong with a release directory (empty list: publishable).

    Every ``*.json`` must parse; every one with a ``schema`` field must satisfy its schema (each
    violation with its JSON path); a model directory must also pass
    :func:`cbench.artifacts.model.verify_artifact` (manifest hashes, required files, config).
    """
    from cbench.errors import CbenchError
    from cbench.schemas import read_json, validate

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
        if is_checkpoint_repository(root):
            return checkpoint_problems(root)
        from cbench.artifacts.model import verify_artifact

        try:
            verify_artifact(root)
        except CbenchError as exc:
            problems.append(str(exc))
    return problems


def is_checkpoint_repository(root: Path) -> bool:
    """A plain Hugging Face checkpoint (``config.json`` naming a ``model_type``, no cbench
    ``meta.json``): a model without ground truth, such as the language model trained here."""
    import json

    if (root / "meta.json").exists() or not (root / "config.json").is_file():
        return False
    try:
        return isinstance(json.loads((root / "config.json").read_text()).get("model_type"), str)
    except (OSError, ValueError, AttributeError):
        return False


def checkpoint_problems(root: Path) -> list[str]:
    """A checkpoint repository needs its weights (safetensors: never a pickle), a tokenizer and a
    card."""
    problems = []
    if not any(root.glob("*.safetensors")):
        problems.append("no *.safetensors weights (a checkpoint repository is published with safetensors only)")
    if any(root.glob("*.bin")) or any(root.glob("*.pt")) or any(root.glob("*.pth")):
        problems.append("pickled weights (*.bin, *.pt, *.pth) are not published; convert them to safetensors")
    for name in ("tokenizer.json", "README.md"):
        if not (root / name).is_file():
            problems.append(f"{name}: missing")
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
        from cbench.hub.remote import check_endpoint

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
        remove_stale_publish_temporaries(hub.root)
        with tempfile.TemporaryDirectory(prefix=f".publish-{os.getpid()}-", dir=hub.root) as tmp:
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


STALE_PUBLISH_S = 3600.0  # a .publish-* directory of no known owner this old was left by a killed publish


def remove_stale_publish_temporaries(root: Path, max_age_s: float = STALE_PUBLISH_S) -> list[str]:
    """Remove the ``.publish-<pid>-*`` working directories a killed publish (or seeding, or a
    pull that seeded) left in the hub ``root``: those whose process is gone, and those without a
    pid (older clients) untouched for ``max_age_s``. Returns the names removed."""
    import re
    import shutil
    import time

    from cbench.files.safe_io import pid_alive

    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(".publish-") or not entry.is_dir(follow_symlinks=False):
            continue
        m = re.match(r"^\.publish-(\d+)-", entry.name)
        try:
            if m:
                stale = int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1)))
            else:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > max_age_s
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed


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


