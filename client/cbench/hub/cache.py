"""The client's cache: verified snapshots in Hugging Face cache layout, and an index of them.

``$CBENCH_HOME/cache`` (default ``~/.cache/cbench/cache``) is an ordinary ``huggingface_hub``
cache directory (``models--cbench--case-3/snapshots/<sha>/...``, ``refs/<tag or branch>`` holding
the commit sha), so ``snapshot_download(..., revision="v1.0.0", cache_dir=..., local_files_only=True)``
reads it too, and ``hf cache ls/verify/prune`` see every pulled revision as referenced.
cbench's own records live beside it, never inside it (so ``scan_cache_dir`` finds nothing it does
not know), in ``<cache>.cbench/`` (``$CBENCH_HOME/cache.cbench``):

* ``index.json``: per repository, the tags resolved so far (tag -> sha) and the snapshots that
  were **verified and completed**. A snapshot is usable only if listed here: the entry is the
  completion marker, written last, after the files were verified and moved in place;
* ``staging/``: every download happens in a private staging cache first; it is verified there
  and only then merged into the cache (blobs first, then the snapshot directory with one
  rename). A download that fails verification, or is killed, never touches the cache proper;
  stale staging directories (their process gone) are removed by the next pull;
* ``locks/``: one file lock per repository, so concurrent pulls of one case take turns (the
  second finds the snapshot complete and returns it).

A cache made before the records moved (``<cache>/.cbench/``) is moved on first use.

Imports only the standard library (and ``filelock`` when writing), so offline ``cbench info``
stays fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from cbench.hub.repos import RepoRef, cbench_home, sort_versions

INDEX_FORMAT = 1
_REF_NAME = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def default_cache_dir() -> Path:
    return cbench_home() / "cache"


@dataclass
class Snapshot:
    """A verified snapshot of one repository at one commit."""

    repo_id: str
    repo_type: str
    sha: str
    path: Path
    tag: str | None = None
    files: int = 0
    size: int = 0
    from_cache: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def ref(self) -> RepoRef:
        return RepoRef(self.repo_id, self.repo_type)

    def to_dict(self) -> dict:
        return {"repo": self.repo_id, "type": self.repo_type, "version": self.tag, "sha": self.sha,
                "path": str(self.path), "files": self.files, "size": self.size, "from_cache": self.from_cache}


def records_dir(root: Path) -> Path:
    """Where cbench keeps its records for the Hugging Face cache ``root``: beside it."""
    root = Path(root)
    return root.with_name(root.name + ".cbench")


def repo_folder_name(ref: RepoRef) -> str:
    """huggingface_hub's cache folder name: ``models--org--name``."""
    return f"{ref.repo_type}s--" + ref.repo_id.replace("/", "--")


def snapshot_of_path(path: str | os.PathLike) -> tuple[str, str] | None:
    """(repo id, commit sha) of a model snapshot directory in cache layout
    (``.../models--org--name/snapshots/<sha>``, the inverse of :func:`repo_folder_name`), else None."""
    path = Path(path)
    folder = path.parent.parent.name
    if path.parent.name != "snapshots" or not folder.startswith("models--"):
        return None
    return folder[len("models--"):].replace("--", "/", 1), path.name


class Cache:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()
        self.meta = records_dir(self.root)
        old = self.root / ".cbench"  # where the records lived before (huggingface_hub warned about it)
        if old.is_dir() and not self.meta.exists():
            try:
                os.replace(old, self.meta)
            except OSError:
                pass

    # -------------------------------------------------------------- paths
    def repo_dir(self, ref: RepoRef) -> Path:
        return self.root / repo_folder_name(ref)

    def snapshot_dir(self, ref: RepoRef, sha: str) -> Path:
        return self.repo_dir(ref) / "snapshots" / sha

    @property
    def index_path(self) -> Path:
        return self.meta / "index.json"

    # -------------------------------------------------------------- index
    def read_index(self) -> dict:
        try:
            data = json.loads(self.index_path.read_text())
            if isinstance(data, dict) and data.get("format") == INDEX_FORMAT and isinstance(data.get("repos"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {"format": INDEX_FORMAT, "repos": {}}

    def index_problem(self) -> str | None:
        """None when ``index.json`` reads as a cache index; else ``"missing"`` or what is wrong."""
        try:
            text = self.index_path.read_bytes()
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        try:
            data = json.loads(text)
        except ValueError:
            return "damaged (not JSON)"
        if not (isinstance(data, dict) and data.get("format") == INDEX_FORMAT and isinstance(data.get("repos"), dict)):
            return "damaged (not a cbench cache index)"
        return None

    def unindexed_snapshots(self) -> list[tuple[RepoRef, str]]:
        """Snapshot directories on disk that the index does not list as complete: left by a
        damaged or deleted ``index.json``, or by a pull killed before its completion marker.
        They are never used (the index is the completion marker)."""
        from cbench.hub.repos import REPO_TYPES

        out = []
        try:
            folders = sorted(self.root.iterdir())
        except OSError:
            return out
        repos = self.read_index()["repos"]
        for folder in folders:
            rtype, _, rest = folder.name.partition("s--")
            if rtype not in REPO_TYPES or "--" not in rest or not (folder / "snapshots").is_dir():
                continue
            ref = RepoRef(rest.replace("--", "/", 1), rtype)
            known = repos.get(ref.key, {}).get("snapshots", {})
            configs = repos.get(ref.key, {}).get("configs", {})
            try:
                shas = sorted(d.name for d in (folder / "snapshots").iterdir() if d.is_dir())
            except OSError:
                continue
            out += [(ref, sha) for sha in shas if sha not in known and sha not in configs]
        return out

    def set_aside_damaged_index(self) -> None:
        """Move an unreadable ``index.json`` to ``index.json.damaged-<time>`` (kept for a look,
        never overwritten) before a new one is written."""
        problem = self.index_problem()
        if problem is not None and problem != "missing":
            try:
                os.replace(self.index_path, self.index_path.with_name(
                    f"index.json.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"))
            except OSError:
                pass

    @contextmanager
    def _index_update(self) -> Iterator[dict]:
        from filelock import FileLock

        self.meta.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.meta / "index.lock")):
            for stale in self.meta.glob("index.*.tmp"):  # left by a writer killed before its rename
                pid = stale.name.split(".")[1]
                if pid.isdigit() and not _alive(int(pid)):
                    stale.unlink(missing_ok=True)
            self.set_aside_damaged_index()
            data = self.read_index()
            yield data
            tmp = self.index_path.with_name(f"index.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.index_path)

    def entry(self, ref: RepoRef) -> dict:
        return self.read_index()["repos"].get(ref.key, {})

    def record_tags(self, ref: RepoRef, tags: dict[str, str], replace: tuple[str, ...] = ()) -> None:
        """Remember what the hub said the tags are (so offline answers use the same revisions).

        A tag already recorded keeps its sha (a version tag that moves is refused by
        :func:`cbench.hub.pull.check_pins`), unless it is named in ``replace`` (accepted by the user)."""
        if not tags:
            return
        known = self.entry(ref).get("tags", {})
        new = {t: sha for t, sha in tags.items() if t not in known or (t in replace and known[t] != sha)}
        if not new:
            return  # nothing new: no lock, no write (keeps cached `cbench info` fast)
        with self._index_update() as data:
            e = data["repos"].setdefault(ref.key, {"tags": {}, "snapshots": {}})
            e["tags"].update({t: sha for t, sha in new.items() if t not in e["tags"] or t in replace})

    def pinned_tags(self, ref: RepoRef) -> dict[str, str]:
        """Tag -> sha as this client first saw them."""
        return dict(self.entry(ref).get("tags", {}))

    def mark_complete(self, snap: Snapshot) -> None:
        """The completion marker: written last, after verification and the move into place."""
        with self._index_update() as data:
            e = data["repos"].setdefault(snap.ref.key, {"tags": {}, "snapshots": {}})
            e["snapshots"][snap.sha] = {"files": snap.files, "size": snap.size, "tag": snap.tag,
                                        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            if isinstance(snap.extra.get("record"), dict):  # rel -> [size, sha256] (cbench.hub.cache_verify)
                e["snapshots"][snap.sha]["record"] = snap.extra["record"]
            if snap.tag:
                e["tags"][snap.tag] = snap.sha
            e["last"] = snap.sha

    def mark_config_complete(self, ref: RepoRef, sha: str, config: str, record: dict, tag: str | None) -> None:
        """The completion marker of one dataset config's files (``cbench.load_dataset(name,
        config)`` fetches only those) in the snapshot directory of ``sha``."""
        with self._index_update() as data:
            e = data["repos"].setdefault(ref.key, {"tags": {}, "snapshots": {}})
            e.setdefault("configs", {}).setdefault(sha, {})[config] = {
                "record": record, "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            if tag:
                e["tags"][tag] = sha

    def config_record(self, ref: RepoRef, sha: str, config: str) -> dict | None:
        """``rel -> [size, sha256]`` of a config fetched on its own, or None."""
        info = self.entry(ref).get("configs", {}).get(sha, {}).get(config)
        rec = info.get("record") if isinstance(info, dict) else None
        return rec if isinstance(rec, dict) and self.snapshot_dir(ref, sha).is_dir() else None

    def forget_config(self, ref: RepoRef, sha: str, config: str) -> None:
        with self._index_update() as data:
            e = data["repos"].get(ref.key)
            if e and sha in e.get("configs", {}):
                e["configs"][sha].pop(config, None)

    def resolve_config_offline(self, ref: RepoRef, revision: str | None, config: str) -> str | None:
        """The sha of a revision whose ``config`` was fetched on its own: a tag (as resolved
        online), a sha, or (None) the newest version that has it."""
        e = self.entry(ref)
        tags = e.get("tags", {})
        have = {sha for sha, cfgs in e.get("configs", {}).items() if config in cfgs}
        if revision is None:
            versions = [t for t in sort_versions(tags) if tags[t] in have]
            return tags[versions[-1]] if versions else None
        sha = tags.get(revision, revision)
        return sha if sha in have else None

    def forget(self, ref: RepoRef, sha: str) -> None:
        with self._index_update() as data:
            e = data["repos"].get(ref.key)
            if e:
                e["snapshots"].pop(sha, None)

    def write_refs(self, ref: RepoRef, sha: str, names) -> None:
        """``refs/<name>`` = ``sha`` for each tag or branch name, as ``huggingface_hub`` writes them,
        for a snapshot that is in the cache (a ref to a missing commit is a corrupt HF cache)."""
        if not self.snapshot_dir(ref, sha).is_dir():
            return
        refs = self.repo_dir(ref) / "refs"
        for name in names:
            if not _REF_NAME.match(name) or ".." in name:
                continue
            path = refs / name
            try:
                if path.is_file() and path.read_text() == sha:
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_text(sha)
                os.replace(tmp, path)
            except OSError:
                pass  # the refs help other tools; cbench's own records are in the index

    def remove_refs_to(self, ref: RepoRef, sha: str) -> None:
        """Drop every ``refs/...`` naming ``sha`` (its snapshot is going away)."""
        refs = self.repo_dir(ref) / "refs"
        if not refs.is_dir():
            return
        for path in refs.rglob("*"):
            try:
                if path.is_file() and path.read_text().strip() == sha:
                    path.unlink()
            except OSError:
                pass

    # -------------------------------------------------------------- look-ups
    def is_complete(self, ref: RepoRef, sha: str) -> bool:
        return sha in self.entry(ref).get("snapshots", {}) and self.snapshot_dir(ref, sha).is_dir()

    def cached_repos(self, repo_type: str | None = None) -> list[RepoRef]:
        out = []
        for key, e in self.read_index()["repos"].items():
            rtype, repo_id = key.split(":", 1)
            if (repo_type is None or rtype == repo_type) and e.get("snapshots"):
                out.append(RepoRef(repo_id, rtype))
        return sorted(out, key=lambda r: r.key)

    def snapshot(self, ref: RepoRef, sha: str) -> Snapshot | None:
        e = self.entry(ref)
        info = e.get("snapshots", {}).get(sha)
        if info is None or not self.snapshot_dir(ref, sha).is_dir():
            return None
        tag = info.get("tag") or next((t for t, s in sorted(e.get("tags", {}).items()) if s == sha), None)
        return Snapshot(ref.repo_id, ref.repo_type, sha, self.snapshot_dir(ref, sha), tag,
                        info.get("files", 0), info.get("size", 0), True)

    def resolve_offline(self, ref: RepoRef, revision: str | None) -> Snapshot | None:
        """The cached snapshot for a revision: a tag (as last resolved online), a sha, or (None)
        the newest cached version (else the last pulled snapshot)."""
        e = self.entry(ref)
        snaps = e.get("snapshots", {})
        tags = e.get("tags", {})
        if revision is None:
            cached_tags = [t for t in sort_versions(tags) if tags[t] in snaps]
            sha = tags[cached_tags[-1]] if cached_tags else e.get("last")
        elif revision in tags:
            sha = tags[revision]
        else:
            sha = revision
        return self.snapshot(ref, sha) if sha else None

    def cached_versions(self, ref: RepoRef) -> list[str]:
        e = self.entry(ref)
        return [t for t in sort_versions(e.get("tags", {})) if e["tags"][t] in e.get("snapshots", {})]

    # -------------------------------------------------------------- writing
    @contextmanager
    def repo_lock(self, ref: RepoRef) -> Iterator[None]:
        from filelock import FileLock

        d = self.meta / "locks"
        d.mkdir(parents=True, exist_ok=True)
        with FileLock(str(d / (repo_folder_name(ref) + ".lock"))):
            yield

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A private huggingface_hub cache directory for one download; removed on exit."""
        base = self.meta / "staging"
        base.mkdir(parents=True, exist_ok=True)
        self.clean_stale_staging()
        path = base / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        path.mkdir()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def clean_stale_staging(self) -> None:
        base = self.meta / "staging"
        if not base.is_dir():
            return
        for d in base.iterdir():
            try:
                pid = int(d.name.split("-", 1)[0])
            except ValueError:
                pid = -1
            if pid != os.getpid() and not _alive(pid):
                shutil.rmtree(d, ignore_errors=True)

    def merge(self, staging: Path, ref: RepoRef, sha: str) -> Path:
        """Move a verified snapshot from ``staging`` into the cache (blobs, tree listing, then the
        snapshot directory in one rename); return its final path. Call under :meth:`repo_lock`."""
        src_repo = staging / repo_folder_name(ref)
        dst_repo = self.repo_dir(ref)
        for sub in ("blobs", "trees", "snapshots", "refs"):
            (dst_repo / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "CACHEDIR.TAG").exists() or _copy_if_exists(staging / "CACHEDIR.TAG", self.root / "CACHEDIR.TAG")
        for blob in (src_repo / "blobs").iterdir() if (src_repo / "blobs").is_dir() else ():
            # always the verified staging copy: a blob already in the cache may be a damaged one
            os.replace(blob, dst_repo / "blobs" / blob.name)
        tree = src_repo / "trees" / f"{sha}.json"
        if tree.exists():
            os.replace(tree, dst_repo / "trees" / f"{sha}.json")
        final = dst_repo / "snapshots" / sha
        if final.exists():  # left by a pull killed after the move, before the marker: replace it
            shutil.rmtree(final)
        os.replace(src_repo / "snapshots" / sha, final)
        return final

    def merge_files(self, staging: Path, ref: RepoRef, sha: str) -> Path:
        """Move the verified files of a partial snapshot (one dataset config) from ``staging`` into
        the snapshot directory of ``sha``, beside whatever files it holds. Call under
        :meth:`repo_lock`."""
        src_repo = staging / repo_folder_name(ref)
        dst_repo = self.repo_dir(ref)
        for sub in ("blobs", "trees", "snapshots", "refs"):
            (dst_repo / sub).mkdir(parents=True, exist_ok=True)
        for blob in (src_repo / "blobs").iterdir() if (src_repo / "blobs").is_dir() else ():
            os.replace(blob, dst_repo / "blobs" / blob.name)
        tree = src_repo / "trees" / f"{sha}.json"
        if tree.exists():
            os.replace(tree, dst_repo / "trees" / f"{sha}.json")
        src, final = src_repo / "snapshots" / sha, dst_repo / "snapshots" / sha
        for link in sorted(p for p in src.rglob("*") if not p.is_dir()):
            target = final / link.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(link, target)  # relative links to ../blobs: same depth, same target
        return final

    def remove_snapshot(self, ref: RepoRef, sha: str) -> None:
        """Drop a snapshot (and the repo folder if nothing else is left in it)."""
        self.remove_refs_to(ref, sha)
        shutil.rmtree(self.snapshot_dir(ref, sha), ignore_errors=True)
        repo = self.repo_dir(ref)
        snaps = repo / "snapshots"
        if snaps.is_dir() and not any(snaps.iterdir()):
            shutil.rmtree(repo, ignore_errors=True)


def _alive(pid: int) -> bool:
    from cbench.files.safe_io import pid_alive

    return pid_alive(pid)


def _copy_if_exists(src: Path, dst: Path) -> None:
    if src.exists():
        shutil.copyfile(src, dst)
