"""``cbench pull``: resolve a case name and version, download a snapshot, verify it, cache it.

Names: ``case-33`` means ``cbench/case-33`` (the SIIT model) if the hub has it, else
``cbench/tracr-case-33``; ``tracr-case-3`` and ``<org>/<name>`` are taken as they are; a bare
``33`` is ``case-33``. A version follows ``@``: ``case-3@v1.0.0`` or ``case-3@<40-hex sha>``;
without one, the newest version tag. Dataset names work the same way (``counterfactuals`` ->
``cbench/counterfactuals``).

Where from (:func:`select_remote`): ``--endpoint URL`` / ``CBENCH_ENDPOINT`` talks to that
Hugging Face-compatible server; otherwise a hub directory (``--hub DIR`` / ``CBENCH_HUB``, default
the per-user hub, seeded from ``model_zoo/``), for which olah is started on loopback for the
duration of the download only (names and tags are read from the hub's git repositories
directly, so an already-cached revision needs no server at all).

Every download goes to a staging cache, is checked there (each file's git blob id against the
server's tree listing, each file against ``meta.json``'s sha256 manifest, each JSON document
against its schema) and only then moves into the cache; see :mod:`cbench.hub.cache`. A snapshot
already cached is checked before it is used, online also against the hub's listing of the commit
(as ``huggingface_hub`` compares the remote commit and etags), and a version tag is checked
against the commit this cache recorded and the zoo pins (:func:`check_pins`). Offline
(``HF_HUB_OFFLINE=1``, or the hub unreachable) answers come from the cache at the revisions last
resolved online.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cbench.errors import (
    ArtifactError,
    CacheDamagedError,
    CbenchError,
    HashMismatchError,
    HubError,
    HubUnreachableError,
    SchemaError,
    TagMovedError,
    UnknownRepoError,
    UnknownRevisionError,
    UsageError,
    closest,
)
from cbench.hub.cache import Cache, Snapshot
from cbench.hub.remote import (
    Remote,
    _http_status,
    _quiet_hf,
    _token_for,
    hf_offline,
    select_remote,
)
from cbench.hub.repos import SHA_RE, RepoRef, is_version, sort_versions
from cbench.hub.seeding import seed_default_hub

DEFAULT_ORG = "cbench"
_CASE_RE = re.compile(r"^(?:case-)?(\d+[a-z]?)$")




# ---------------------------------------------------------------------------- names
def parse_spec(spec: str) -> tuple[str, str | None]:
    """``'case-3@v1.0.0'`` -> ``('case-3', 'v1.0.0')``."""
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("give a case or repository name, e.g. case-3, tracr-case-3 or cbench/case-3@v1.0.0")
    name, _, rev = spec.strip().partition("@")
    if not name or (_ and not rev):
        raise UsageError(f"{spec!r}: expected NAME or NAME@VERSION (e.g. case-3@v1.0.0)")
    return name, (rev or None)


def candidates(name: str, repo_type: str = "model") -> list[str]:
    """Repository ids a name may mean, in the order they are tried."""
    if "/" in name:
        return [name]
    m = _CASE_RE.match(name)
    if m and repo_type == "model":
        return [f"{DEFAULT_ORG}/case-{m[1]}", f"{DEFAULT_ORG}/tracr-case-{m[1]}"]
    return [f"{DEFAULT_ORG}/{name}"]


def short_name(repo_id: str) -> str:
    return repo_id.split("/", 1)[1] if repo_id.startswith(DEFAULT_ORG + "/") else repo_id


def natural_key(name: str) -> list:
    """Sort key putting case-3 before case-11 (digit runs compare as numbers)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


# ---------------------------------------------------------------------------- where from
















# ---------------------------------------------------------------------------- resolving
@dataclass
class Resolved:
    ref: RepoRef
    sha: str
    tag: str | None
    tags: dict[str, str]
    branches: dict[str, str] = field(default_factory=dict)

    def ref_names(self) -> list[str]:
        """The tags and branches that name this commit (written to the cache's ``refs/``)."""
        return sorted(n for n, s in {**self.tags, **self.branches}.items() if s == self.sha)


def resolve(name: str, revision: str | None, repo_type: str, remote: Remote) -> Resolved:
    """Name and revision -> repository and commit sha, asking the hub. UnknownRepoError with the
    closest names, UnknownRevisionError with the available versions."""
    tried = candidates(name, repo_type)
    for repo_id in tried:
        ref = RepoRef(repo_id, repo_type)
        try:
            both = remote.refs_and_branches(ref)
        except UsageError:  # not a valid repository name at all
            both = None
        if both is not None:
            tags, branches = both
            return Resolved(ref, *_pick_revision(ref, revision, tags, remote), tags, branches)
    raise UnknownRepoError(_unknown_repo_message(name, tried, repo_type, remote.names(repo_type), str(remote)))


def _unknown_repo_message(name: str, tried: list[str], repo_type: str, available: list[str], where: str) -> str:
    what = "case" if repo_type == "model" else "dataset"
    shorts = sorted((short_name(r) for r in available), key=natural_key)
    near = closest(short_name(name) if "/" in name else name, shorts) or closest(name, available)
    msg = f"no {what} {name!r} on {where} (looked for {', '.join(tried)})"
    if near:
        msg += f"; closest: {', '.join(near)}"
    elif shorts:
        msg += f"; available: {', '.join(shorts[:12])}{', ...' if len(shorts) > 12 else ''}"
    else:
        msg += f"; it has no {what}s"
        if "hub " in where:
            msg += (" (the default hub is seeded from model_zoo/releases, or set CBENCH_ZOO; publish into a hub "
                    "with `cbench publish`, or use --hub DIR / --endpoint URL)")
    return msg


def _pick_revision(ref: RepoRef, revision: str | None, tags: dict[str, str], remote: Remote | None):
    versions = sort_versions(tags)
    if revision is None:
        if not versions:
            raise UnknownRevisionError(f"{ref.repo_id} has no version tags yet")
        return tags[versions[-1]], versions[-1]
    if revision in tags:
        return tags[revision], revision
    if SHA_RE.match(revision):
        if remote is not None and remote.hub_dir is not None and not remote.hub.has_commit(ref.repo_id, revision,
                                                                                               ref.repo_type):
            raise UnknownRevisionError(f"{ref.repo_id} has no commit {revision}; versions: "
                                       f"{', '.join(versions) or 'none'}")
        tag = next((t for t in versions if tags[t] == revision), None)
        return revision, tag
    hint = "" if is_version(revision) or SHA_RE.match(revision) else " (a version is vX.Y.Z or a 40-hex commit sha)"
    raise UnknownRevisionError(f"{ref.repo_id} has no version {revision}{hint}; available: "
                               f"{', '.join(versions) or 'none'}")


# ---------------------------------------------------------------------------- pulling
def pull(spec: str, revision: str | None = None, *, repo_type: str = "model", endpoint: str | None = None,
         hub: str | os.PathLike | None = None, offline: bool | None = None,
         cache_dir: str | os.PathLike | None = None, accept_moved_tag: bool = False) -> Snapshot:
    """Make ``spec`` (``case-3``, ``case-3@v1.0.0``, ``cbench/case-3@<sha>``) available locally
    and return its verified :class:`~cbench.hub.cache.Snapshot`.

    A cached snapshot is checked (:mod:`cbench.hub.cache_verify`) before it is returned; a damaged one
    is downloaded again (``snap.extra["repaired"]`` says what was wrong), or refused offline; online
    it must also hold the files the hub lists for that commit now (a cache rewritten consistently,
    blobs, links, manifest and records together, passes every check the cache can make alone). A
    version tag that now names another commit than the one this cache recorded (or the zoo's
    ``index.json`` pins, on any hub) is refused (:class:`~cbench.errors.TagMovedError`)
    unless ``accept_moved_tag``."""
    name, rev = parse_spec(spec)
    if revision is not None and rev is not None and revision != rev:
        raise UsageError(f"two versions given: {spec!r} and revision={revision!r}")
    revision = revision or rev
    cache = Cache(cache_dir)
    if offline if offline is not None else hf_offline():
        return from_cache(name, revision, repo_type, cache, reason="offline (HF_HUB_OFFLINE=1)")
    remote = select_remote(endpoint, hub)
    if remote.default:  # seed lazily: only the repositories this name may mean
        seed_default_hub(remote.hub_dir, [RepoRef(r, repo_type) for r in candidates(name, repo_type)])
    try:
        res = resolve(name, revision, repo_type, remote)
    except HubUnreachableError as exc:
        return from_cache(name, revision, repo_type, cache, reason=str(exc))
    moved = check_pins(res, cache, remote, accept_moved_tag)
    cache.record_tags(res.ref, res.tags, replace=moved)
    # online, a cached snapshot is also checked against the hub's listing of the commit now
    listing = remote.listing(res.ref, res.sha) if cache.snapshot(res.ref, res.sha) is not None else None
    snap = _intact_cached(cache, res, listing)
    if snap is not None:
        cache.write_refs(res.ref, res.sha, res.ref_names())
        return snap
    with cache.repo_lock(res.ref):
        repaired = None
        if cache.snapshot(res.ref, res.sha) is not None:  # a concurrent pull may have finished it
            from cbench.hub.cache_verify import check_cached, discard

            if listing is None:
                listing = remote.listing(res.ref, res.sha)
            report = check_cached(cache, res.ref, res.sha, listing)
            if report.ok:
                cache.write_refs(res.ref, res.sha, res.ref_names())
                return _tagged(cache.snapshot(res.ref, res.sha), res)
            discard(cache, report)
            repaired = report.summary()
        snap = _download(res, remote, cache)
        cache.write_refs(res.ref, res.sha, res.ref_names())  # after the completion marker
        if repaired:
            snap.extra["repaired"] = repaired
        return snap


def _tagged(snap: Snapshot, res: Resolved) -> Snapshot:
    snap.tag = res.tag or snap.tag
    return snap


def _intact_cached(cache: Cache, res: Resolved, listing: dict[str, set[str]] | None) -> Snapshot | None:
    """The cached snapshot of ``res`` if it is there, intact and the same files as the hub's
    ``listing`` of the commit (checked without the lock)."""
    snap = cache.snapshot(res.ref, res.sha)
    if snap is None:
        return None
    from cbench.hub.cache_verify import check_cached

    return _tagged(snap, res) if check_cached(cache, res.ref, res.sha, listing).ok else None


# ---------------------------------------------------------------------------- tag pins
def zoo_pins(ref: RepoRef) -> dict[str, str]:
    """Version -> commit sha that the zoo's ``releases/index.json`` pins for a repository."""
    from cbench.hub.zoo import zoo_dir

    zoo = zoo_dir()
    if zoo is None:
        return {}
    try:
        doc = json.loads((Path(zoo) / "releases" / "index.json").read_text())
    except (OSError, ValueError):
        return {}
    pins: dict[str, str] = {}
    entries = []
    # a model and a dataset may share a name (cbench/ioi is both): pins are looked up by type
    if isinstance(doc, dict) and ref.repo_type != "dataset":
        for case in doc.get("cases") or []:
            if isinstance(case, dict):
                entries.append(case)
                entries += [m for m in case.get("models") or [] if isinstance(m, dict)]
    if isinstance(doc, dict) and ref.repo_type == "dataset":
        entries += [d for d in doc.get("datasets") or [] if isinstance(d, dict)]
    for entry in entries:
        if entry.get("repo") != ref.repo_id:
            continue
        for v in entry.get("versions") or []:
            if isinstance(v, dict) and isinstance(v.get("version"), str) and isinstance(v.get("revision"), str):
                pins[v["version"]] = v["revision"]
    return pins


def check_pins(res: Resolved, cache: Cache, remote: Remote, accept: bool = False) -> tuple[str, ...]:
    """Refuse a version tag that moved: the hub says ``res.tag`` is ``res.sha``, but this cache
    recorded another sha for it, or the zoo's index pins another. The zoo's pins hold on every hub
    (the default one, ``--hub DIR``, ``--endpoint URL``) for every repository the zoo released, so
    a fresh cache is protected too; a hub that serves other content under those names is refused
    (publish it under another org, or point ``CBENCH_ZOO`` at the zoo it came from). A tag this
    cache already recorded at the hub's commit passes (it was checked when first seen, or accepted
    with ``accept`` since). Returns the tags accepted as moved (``accept``)."""
    if res.tag is None:
        return ()
    recorded = cache.pinned_tags(res.ref).get(res.tag)
    if recorded == res.sha:  # checked against the zoo when first seen, or accepted by the user since
        return ()
    pins = [("this cache recorded", recorded), ("the zoo's releases/index.json pins", zoo_pins(res.ref).get(res.tag))]
    for who, sha in pins:
        if sha and sha != res.sha:
            if accept:
                return (res.tag,)
            raise TagMovedError(
                f"{res.ref.repo_id} {res.tag} now points at commit {res.sha}, but {who} {sha}; a released "
                f"version must not change, so it was refused and nothing was downloaded. Check the hub "
                f"({remote}); to use the new commit anyway, pass --accept-moved-tag (or pull "
                f"{short_name(res.ref.repo_id)}@{sha} for the recorded one)")
    return ()




def from_cache(name: str, revision: str | None, repo_type: str, cache: Cache, reason: str) -> Snapshot:
    """The cached snapshot for a name and revision, or a clear error saying what to do."""
    name_repos = candidates(name, repo_type)
    for repo_id in name_repos:
        ref = RepoRef(repo_id, repo_type)
        if not cache.entry(ref).get("snapshots"):
            continue
        snap = cache.resolve_offline(ref, revision)
        if snap is not None:
            from cbench.hub.cache_verify import check_cached, damaged_message

            report = check_cached(cache, ref, snap.sha)
            if not report.ok:
                raise CacheDamagedError(damaged_message(snap, report))
            snap.extra["offline_reason"] = reason
            return snap
        raise UnknownRevisionError(f"{reason}; {repo_id} {revision} is not in the cache "
                                   f"(cached versions: {', '.join(cache.cached_versions(ref)) or 'none'})")
    from cbench.hub.cache_verify import index_damage_message

    if cache.index_problem() not in (None, "missing"):  # unreadable: what it held is unknown, say so
        damage = index_damage_message(cache, name)
        if damage is not None:
            raise CacheDamagedError(damage)
    raise HubUnreachableError(
        f"{reason}, and {name} is not cached. Point at a hub that is up with --hub DIR or "
        "--endpoint URL (or CBENCH_HUB / CBENCH_ENDPOINT), or pull it once while the hub is reachable; "
        "later uses work offline (HF_HUB_OFFLINE=1)")


def _download(res: Resolved, remote: Remote, cache: Cache) -> Snapshot:
    with endpoint_of(remote) as endpoint, cache.staging() as staging:
        from huggingface_hub import snapshot_download

        try:
            path = Path(snapshot_download(res.ref.repo_id, revision=res.sha, repo_type=res.ref.repo_type,
                                          endpoint=endpoint, cache_dir=str(staging),
                                          token=_token_for(endpoint)))
        except Exception as exc:  # noqa: BLE001 - mapped to cbench errors
            raise _download_error(exc, res, endpoint) from None
        files, size = verify_snapshot(path, staging / _folder(res.ref) / "trees" / f"{res.sha}.json",
                                      label=f"{res.ref.repo_id}@{res.tag or res.sha[:12]}")
        from cbench.hub.cache_verify import record_of

        record = record_of(path)
        final = cache.merge(staging, res.ref, res.sha)
    snap = Snapshot(res.ref.repo_id, res.ref.repo_type, res.sha, final, res.tag, files, size, from_cache=False,
                    extra={"record": record})
    cache.mark_complete(snap)
    return snap


@contextlib.contextmanager
def endpoint_of(remote: Remote) -> Iterator[str]:
    """The endpoint to download from: ``remote``'s URL, or the process's shared server over its hub
    directory (:func:`cbench.hub.server.shared_server`; huggingface_hub and the schemas are imported
    while olah starts, then the server is waited for)."""
    _quiet_hf()
    if remote.hub_dir is None:
        yield remote.endpoint
        return
    from cbench.hub.server import shared_server

    with shared_server(remote.hub_dir) as server:
        import huggingface_hub  # noqa: F401  (imported while olah starts)

        import cbench.schemas  # noqa: F401  (verification needs it)

        server.wait_ready()
        yield server.endpoint


def _folder(ref: RepoRef) -> str:
    from cbench.hub.cache import repo_folder_name

    return repo_folder_name(ref)


def _download_error(exc: Exception, res: Resolved, endpoint: str) -> CbenchError:
    if isinstance(exc, CbenchError):
        return exc
    status = _http_status(exc)
    what = f"{res.ref.repo_id}@{res.tag or res.sha}"
    if status in (401, 404):
        return UnknownRevisionError(f"{endpoint} has no {what} (HTTP {status}); versions: "
                                    f"{', '.join(sort_versions(res.tags)) or 'none'}")
    if status is not None or "500 Internal Server Error" in str(exc):
        return HubError(f"downloading {what} from {endpoint} failed: the server answered "
                        f"HTTP {status or 500}")
    return HubUnreachableError(f"downloading {what} from {endpoint} failed: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}")


# ---------------------------------------------------------------------------- verification
def git_blob_id(path: Path) -> str:
    from cbench.hub.cache_verify import digest_file

    return digest_file(path).git_blob


def sha256_of(path: Path) -> str:
    from cbench.hub.cache_verify import digest_file

    return digest_file(path).sha256


def verify_snapshot(path: Path, tree_listing: Path | None = None, label: str = "") -> tuple[int, int]:
    """Check a downloaded snapshot; return (file count, total bytes).

    1. every file's git blob id equals the one in the server's tree listing (when there is one);
    2. ``meta.json``'s ``files`` manifest: every listed file exists with that sha256, and every
       other file of the snapshot is listed (HashMismatchError / ArtifactError);
    3. every JSON document with a ``schema`` field satisfies its schema (SchemaError).
    """
    from cbench.schemas import read_json, validate

    label = label or str(path)
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    size = sum((path / f).stat().st_size for f in files)
    if tree_listing is not None and tree_listing.exists():
        try:
            listing = json.loads(tree_listing.read_text()).get("files", {})
        except (OSError, ValueError):
            listing = {}
        for rel, info in listing.items():
            blob = info.get("blob_id") if isinstance(info, dict) else None
            if blob and (path / rel).is_file() and git_blob_id(path / rel) != blob:
                raise HashMismatchError(f"{label}: {rel} does not match the hub's blob id {blob[:12]}; "
                                        "refused, nothing was cached")
    meta_path = path / "meta.json"
    if meta_path.is_file():
        meta = read_json(meta_path)
        manifest = meta.get("files") if isinstance(meta, dict) else None
        if isinstance(manifest, dict):
            for rel, digest in sorted(manifest.items()):
                target = path / rel
                if not target.is_file():
                    raise ArtifactError(f"{label}: meta.json lists {rel}, which the snapshot does not have; "
                                        "refused, nothing was cached")
                actual = sha256_of(target)
                if actual != digest:
                    raise HashMismatchError(f"{label}: {rel} has sha256 {actual[:16]}..., meta.json says "
                                            f"{str(digest)[:16]}...; refused, nothing was cached")
            extra = [f for f in files if f != "meta.json" and f not in manifest
                     and not any(part.startswith(".") for part in f.split("/"))]
            if extra:
                raise HashMismatchError(f"{label}: {', '.join(extra[:5])} not in meta.json's sha256 manifest; "
                                        "refused, nothing was cached")
    for rel in files:
        if not rel.endswith(".json"):
            continue
        doc = read_json(path / rel)
        if isinstance(doc, dict) and "schema" in doc:
            violations = validate(doc)
            if violations:
                raise SchemaError(f"{label}: {rel} is not a valid {doc.get('schema')} document; "
                                  "refused, nothing was cached", [str(v) for v in violations])
    return len(files), size
