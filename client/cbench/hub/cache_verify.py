"""Checking what is in the cache before it is used: every cached snapshot, every time.

A snapshot in the cache (``<repo>/snapshots/<sha>/``) is checked against four independent
records, and any difference is a problem:

1. **its blob names**: each file of a snapshot is a link to ``blobs/<id>``, where ``<id>`` is the
   file's git blob id (40 hex; sha1 of ``blob <size>\\0<bytes>``) or, for Git LFS files, its
   sha256 (64 hex). The bytes must hash to the name;
2. **the hub's tree listing** kept from the download (``trees/<sha>.json``): the same files with
   the same blob ids;
3. **the completion record** in ``<cache>.cbench/index.json``: the size and sha256 of every file as it
   was verified when it entered the cache (no file missing, none added);
4. **``meta.json``'s manifest** (models): the sha256 of every listed file.

So a flipped byte, a replaced file, or a ``meta.json`` edited to match tampered weights (its own
blob id and recorded sha256 then differ) are found. :func:`check_cached` returns the problems;
``cbench pull`` repairs a damaged snapshot by downloading it again, other commands refuse it,
and ``cbench cache verify`` checks everything cached (see :mod:`cbench.hub.pull`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cbench.files.safe_io import describe_mode
from cbench.hub.cache import Cache, Snapshot
from cbench.hub.repos import RepoRef

_GIT_ID = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_MANIFEST_FILES = 100_000


@dataclass(frozen=True)
class FileDigest:
    size: int
    sha256: str
    git_blob: str


def digest_file(path: Path, _retry: bool = True) -> FileDigest:
    """Size, sha256 and git blob id of a file, in one read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO planted in a snapshot cannot hang it
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(f"{describe_mode(st.st_mode)}, not a regular file")
    size = st.st_size
    sha256 = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)
    n = 0
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            sha256.update(chunk)
            git.update(chunk)
            n += len(chunk)
    if n != size:  # changed while read: once more, then give up
        if _retry:
            return digest_file(path, _retry=False)
        raise OSError(f"{path} changed while it was read")
    return FileDigest(n, sha256.hexdigest(), git.hexdigest())


def snapshot_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file in a snapshot (links followed), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            out.append((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(out)


def record_of(root: Path) -> dict[str, list]:
    """What the completion record stores per file: ``rel -> [size, sha256]``."""
    out = {}
    for rel in snapshot_files(root):
        d = digest_file(root / rel)
        out[rel] = [d.size, d.sha256]
    return out


@dataclass
class Report:
    """The problems of one cached snapshot (empty: intact)."""

    ref: RepoRef
    sha: str
    path: Path
    problems: list[str] = field(default_factory=list)
    bad_blobs: set[str] = field(default_factory=set)
    files: int = 0
    config: str | None = None  # a dataset config fetched on its own (its files only)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return f"{self.problems[0]}{more}" if self.problems else "intact"


def check_cached(cache: Cache, ref: RepoRef, sha: str, hub_listing: dict[str, set[str]] | None = None) -> Report:
    """Check one cached snapshot against its blob names, tree listing, completion record and
    manifest, and (online, ``hub_listing``: path -> the ids the hub gives that file now, its git
    blob id and for LFS files its sha256) against what the hub lists for that commit today: the
    records above are all in the cache, so a cache rewritten consistently passes them, and only
    the hub can tell (``huggingface_hub`` compares each file's etag with the hub's the same way)."""
    root = cache.snapshot_dir(ref, sha)
    rep = Report(ref, sha, root)
    if not root.is_dir():
        rep.problems.append("the snapshot directory is missing")
        return rep
    info = cache.entry(ref).get("snapshots", {}).get(sha) or {}
    record = info.get("record") if isinstance(info.get("record"), dict) else None
    listing, damage = tree_listing(cache.repo_dir(ref) / "trees" / f"{sha}.json")
    if damage is not None:
        rep.problems.append(damage)
    try:
        rep.problems += layout_problems(root, cache.repo_dir(ref) / "blobs")
        files = snapshot_files(root)
    except OSError as exc:
        rep.problems.append(f"cannot list it ({exc.strerror or exc})")
        return rep
    rep.files = len(files)
    digests: dict[str, FileDigest] = {}
    for rel in files:
        p = root / rel
        try:
            d = digest_file(p)
        except OSError as exc:
            rep.problems.append(f"{rel}: cannot read it ({exc.strerror or exc})")
            continue
        digests[rel] = d
        blob = os.path.basename(os.readlink(p)) if p.is_symlink() else None
        if blob is not None:
            if _GIT_ID.match(blob) and blob != d.git_blob:
                rep.problems.append(f"{rel}: its bytes do not match its blob id {blob[:12]}")
                rep.bad_blobs.add(blob)
            elif _SHA256.match(blob) and blob != d.sha256:
                rep.problems.append(f"{rel}: its bytes do not match its blob sha256 {blob[:12]}")
                rep.bad_blobs.add(blob)
        if listing is not None:
            want = listing.get(rel)
            if want is None:
                rep.problems.append(f"{rel}: not in the hub's listing of this commit")
            elif want not in (d.git_blob, d.sha256):
                rep.problems.append(f"{rel}: differs from the hub's blob {want[:12]}")
                if blob:
                    rep.bad_blobs.add(blob)
    if listing is not None:
        for rel in sorted(set(listing) - set(files)):
            rep.problems.append(f"{rel}: missing (the hub's listing has it)")
    if hub_listing is not None:
        rep.problems += _hub_problems(root, files, digests, hub_listing, rep.bad_blobs)
    if record is not None:
        for rel, (size, digest) in sorted(record.items()):
            d = digests.get(rel)
            if d is None:
                if rel not in files:
                    rep.problems.append(f"{rel}: missing (it was there when verified)")
            elif d.size != size:
                rep.problems.append(f"{rel}: {d.size} bytes, {size} when verified")
            elif d.sha256 != digest:
                rep.problems.append(f"{rel}: sha256 {d.sha256[:12]}... differs from {digest[:12]}... when verified")
        for rel in sorted(set(files) - set(record)):
            rep.problems.append(f"{rel}: added since it was verified")
    rep.problems += _manifest_problems(root, digests)
    return rep


def check_config(cache: Cache, ref: RepoRef, sha: str, config: str,
                 hub_listing: dict[str, set[str]] | None = None) -> Report:
    """Check the files of a dataset config fetched on its own (``cbench.load_dataset(name,
    config)``) against their blob names, the hub's listing and the completion record (and
    online, ``hub_listing``, what the hub lists for the commit now)."""
    root = cache.snapshot_dir(ref, sha)
    rep = Report(ref, sha, root, config=config)
    record = cache.config_record(ref, sha, config)
    if record is None:
        rep.problems.append(f"config {config} is not recorded as fetched")
        return rep
    listing, damage = tree_listing(cache.repo_dir(ref) / "trees" / f"{sha}.json")
    listing = listing or {}
    if damage is not None:
        rep.problems.append(damage)
    rep.files = len(record)
    for rel, (size, digest) in sorted(record.items()):
        p = root / rel
        try:
            d = digest_file(p)
        except OSError:
            rep.problems.append(f"{rel}: missing (it was there when verified)")
            continue
        blob = os.path.basename(os.readlink(p)) if p.is_symlink() else None
        if blob is not None and blob not in (d.git_blob, d.sha256):
            rep.problems.append(f"{rel}: its bytes do not match its blob id {blob[:12]}")
            rep.bad_blobs.add(blob)
        elif listing.get(rel) not in (None, d.git_blob, d.sha256):
            rep.problems.append(f"{rel}: differs from the hub's blob {listing[rel][:12]}")
        elif (d.size, d.sha256) != (size, digest):
            rep.problems.append(f"{rel}: differs from the file verified ({d.size} bytes, sha256 {d.sha256[:12]}...)")
        elif hub_listing is not None and not hub_listing.get(rel, set()) & {d.git_blob, d.sha256}:
            rep.problems.append(f"{rel}: differs from the hub's file, or the hub does not list it for this commit")
            if blob is not None:
                rep.bad_blobs.add(blob)
    return rep


def _hub_problems(root: Path, files: list[str], digests: dict[str, FileDigest], hub_listing: dict[str, set[str]],
                  bad_blobs: set[str]) -> list[str]:
    """How the cached files differ from what the hub lists for the commit now."""
    out = []
    for rel in files:
        want = hub_listing.get(rel)
        d = digests.get(rel)
        if want is None:
            out.append(f"{rel}: the hub does not list it for this commit")
        elif d is not None and not want & {d.git_blob, d.sha256}:
            out.append(f"{rel}: differs from the hub's file (blob {min(want)[:12]})")
        else:
            continue
        p = root / rel
        if p.is_symlink():
            bad_blobs.add(os.path.basename(os.readlink(p)))
    for rel in sorted(set(hub_listing) - set(files)):
        out.append(f"{rel}: missing (the hub lists it for this commit)")
    return out


def tree_listing(path: Path) -> tuple[dict[str, str] | None, str | None]:
    """(``rel -> blob id`` from the tree listing kept from the download, a problem): (None, None)
    when there is no listing; (None, what is wrong) when there is one that cannot be read, is not
    JSON or not a listing of files with blob ids -- damage, never taken for an absent record."""
    name = f"trees/{path.name}"
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{name}: cannot read the hub's tree listing ({exc.strerror or exc})"
    try:
        doc = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, f"{name}: the hub's tree listing is damaged (not JSON)"
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict):
        return None, f"{name}: the hub's tree listing is damaged (no object of files)"
    out = {}
    for rel, info in files.items():
        blob = info.get("blob_id") if isinstance(info, dict) else None
        if not isinstance(blob, str) or not (_GIT_ID.match(blob) or _SHA256.match(blob)):
            return None, f"{name}: the hub's tree listing is damaged ({rel!r} has no blob id)"
        out[rel] = blob
    return out, None


def layout_problems(root: Path, blobs: Path) -> list[str]:
    """What in a snapshot directory is not a file of the snapshot: every entry must be a real
    directory, a link to a regular file in the repository's ``blobs/`` or a regular file; a link
    elsewhere (or to a directory, which a walk would not enter), a dangling link, a FIFO, socket
    or device is a problem. (Files the records do not list are found against the records.)"""
    out = []
    blobs_real = os.path.realpath(blobs)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(p)
                if os.path.dirname(target) != blobs_real:
                    out.append(f"{rel}: a link to {os.readlink(p)}, not to a blob of this repository")
                elif not os.path.isfile(target) or os.path.islink(target):
                    out.append(f"{rel}: a link to a blob that is missing or not a regular file")
            elif not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                out.append(f"{rel}: {describe_mode(st.st_mode)}, not a file of the snapshot")
    return out


def _manifest_problems(root: Path, digests: dict[str, FileDigest]) -> list[str]:
    meta = root / "meta.json"
    if "meta.json" not in digests:
        return []
    try:
        from cbench.schemas import read_json

        doc = read_json(meta)
    except Exception as exc:  # noqa: BLE001 - any unreadable meta.json is a problem, not a crash
        return [f"meta.json: {str(exc).splitlines()[0]}"]
    manifest = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(manifest, dict):
        return []
    out = []
    for rel, digest in sorted(manifest.items())[:MAX_MANIFEST_FILES]:
        d = digests.get(rel)
        if d is None:
            out.append(f"{rel}: listed in meta.json but missing")
        elif d.sha256 != digest:
            out.append(f"{rel}: sha256 {d.sha256[:12]}... does not match meta.json's {str(digest)[:12]}...")
    return out


def verify_all(cache: Cache) -> list[Report]:
    """Every snapshot the cache's index says is complete, checked."""
    out = []
    for key, entry in sorted(cache.read_index()["repos"].items()):
        rtype, repo_id = key.split(":", 1)
        ref = RepoRef(repo_id, rtype)
        for sha in sorted(entry.get("snapshots", {})):
            out.append(check_cached(cache, ref, sha))
        for sha, configs in sorted(entry.get("configs", {}).items()):
            if sha not in entry.get("snapshots", {}):  # a full snapshot covers its configs
                out += [check_config(cache, ref, sha, c) for c in sorted(configs)]
    problem = cache.index_problem()
    why = (f"the cache's index {cache.index_path} is {problem}" if problem is not None
           else "a pull did not finish")
    for ref, sha in cache.unindexed_snapshots():
        out.append(Report(ref, sha, cache.snapshot_dir(ref, sha),
                          [f"not recorded as verified and complete ({why}); it is not used"]))
    return out


def index_damage_message(cache: Cache, name: str) -> str | None:
    """What to say when ``name`` is not in the index while snapshots of it are on disk (the
    index is damaged or was deleted), else None."""
    problem = cache.index_problem()
    on_disk = [ref for ref, _ in cache.unindexed_snapshots()
               if ref.repo_id == name or ref.repo_id.split("/", 1)[1] == name]
    if not on_disk:
        return None
    why = f"its index {cache.index_path} is {problem}" if problem else "it holds snapshots no pull completed"
    return (f"the cache {cache.root} is damaged: {why}, so the snapshot of {on_disk[0].repo_id} on disk is not "
            f"used. Run `cbench cache verify --repair` (removes what the index does not vouch for), then "
            f"`cbench pull {name}` with the hub reachable")


def discard(cache: Cache, rep: Report) -> None:
    """Remove a damaged snapshot and its bad blobs from the cache (the next pull downloads it
    again). Call under the repository's lock."""
    import shutil

    if rep.config is not None:  # a config fetched on its own: drop its files and its record
        cache.forget_config(rep.ref, rep.sha, rep.config)
        for blob in rep.bad_blobs:
            if re.match(r"^[0-9a-f]{40,64}$", blob):
                (cache.repo_dir(rep.ref) / "blobs" / blob).unlink(missing_ok=True)
        return
    cache.forget(rep.ref, rep.sha)
    cache.remove_refs_to(rep.ref, rep.sha)
    blobs = cache.repo_dir(rep.ref) / "blobs"
    for blob in rep.bad_blobs:
        if re.match(r"^[0-9a-f]{40,64}$", blob):
            (blobs / blob).unlink(missing_ok=True)
    shutil.rmtree(rep.path, ignore_errors=True)
    (cache.repo_dir(rep.ref) / "trees" / f"{rep.sha}.json").unlink(missing_ok=True)


def damaged_message(snap: Snapshot, rep: Report) -> str:
    return (f"the cached {snap.repo_id}@{snap.tag or snap.sha[:12]} is damaged: {rep.summary()}; nothing was "
            f"loaded. Run `cbench pull {snap.repo_id}@{snap.tag or snap.sha}"
            f"{' --type dataset' if snap.repo_type == 'dataset' else ''}` with the hub reachable to download it "
            "again (`cbench cache verify` checks the whole cache)")
