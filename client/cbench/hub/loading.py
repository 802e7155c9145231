"""``cbench.load`` and ``cbench.load_dataset``: artifacts at an exact revision, online or offline.

Both go through :func:`cbench.hub.pull.pull` (which answers from the cache when offline or when the
revision is already cached), then read the local snapshot:

* :func:`load` returns a :class:`~cbench.artifacts.model.ModelArtifact` (``.load_model()`` builds the
  HookedTransformer);
* :func:`load_dataset` calls ``datasets.load_dataset(<snapshot path>, config)``. Passing the
  local path, not the repository id, is deliberate: offline, ``datasets.load_dataset(repo,
  revision=...)`` silently ignores the revision (datasets issue 7928); a snapshot directory is
  one exact revision.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os

from cbench.errors import CbenchError, UsageError


def load(case: str, revision: str | None = None, *, endpoint: str | None = None,
         hub: str | os.PathLike | None = None, offline: bool | None = None, verify: bool = True):
    """The model artifact of ``case`` (``'case-3'``, ``'tracr-case-3'``, ``'cbench/case-3@v1.0.0'``)."""
    from cbench.artifacts.model import read_model_artifact
    from cbench.hub.pull import pull

    snap = pull(case, revision, repo_type="model", endpoint=endpoint, hub=hub, offline=offline)
    return read_model_artifact(snap.path, verify=verify)


def load_dataset(name: str, config: str | None = None, revision: str | None = None, *,
                 endpoint: str | None = None, hub: str | os.PathLike | None = None,
                 offline: bool | None = None, **kwargs):
    """``datasets.load_dataset`` on a cbench dataset (``'counterfactuals'`` or ``'org/name'``) at
    an exact revision (a version tag or a commit sha; default the newest version).

    With a ``config``, only the card and that config's files are downloaded (:func:`config_snapshot`),
    verified and kept in the cache, so the same call answers offline afterwards."""
    from cbench.hub.pull import pull

    if config is None:
        snap = pull(name, revision, repo_type="dataset", endpoint=endpoint, hub=hub, offline=offline)
        return open_dataset(snap, config, **kwargs)
    snap = config_snapshot(name, config, revision, endpoint=endpoint, hub=hub, offline=offline)
    return open_dataset(snap, config, **kwargs)


def datasets_cache_dir() -> "os.PathLike":
    """Where the datasets library keeps its Arrow cache for cbench: ``$CBENCH_HOME/datasets``."""
    from cbench.hub.repos import cbench_home

    return cbench_home() / "datasets"


def open_dataset(snap, config: str | None = None, **kwargs):
    """``datasets.load_dataset`` on a verified snapshot. The Arrow cache lives under CBENCH_HOME, one
    directory per snapshot commit (never ``~/.cache/huggingface``; a re-downloaded snapshot gets a
    fresh one)."""
    cache_dir = datasets_cache_dir() / f"{snap.repo_id.replace('/', '--')}--{snap.sha}"
    os.environ.setdefault("HF_DATASETS_CACHE", str(datasets_cache_dir()))  # before datasets is imported
    import datasets

    kwargs.setdefault("cache_dir", str(cache_dir))
    args = (str(snap.path), config)
    per = _data_files(_card_front_matter(snap.path)).get(config) if snap.extra.get("config") == config else None
    if per and all(f.endswith(".parquet") for fs in per.values() for f in fs):
        # a snapshot holding this config's files only: name them (the library would otherwise
        # resolve every config of the card, and the others' files are not there)
        args = ("parquet",)
        kwargs["data_files"] = {split: [str(snap.path / f) for f in fs] for split, fs in per.items()}
    try:
        return datasets.load_dataset(*args, **kwargs)
    except ValueError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {msg}") from None
    except (FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as exc:  # type: ignore[attr-defined]
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged parquet file, an arrow error: one line
        msg = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: cannot read the dataset "
                          f"({type(exc).__name__}{': ' + msg if msg else ''})") from None


def _card_front_matter(path) -> dict:
    """The front matter of the card in ``path`` (read once per file version: the counterfactuals
    card lists every config, and the bench reads it once per case)."""
    from pathlib import Path

    card = Path(path) / "README.md"
    try:
        st = card.stat()
    except OSError:
        return {}
    return _cached_front_matter(str(card), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _cached_front_matter(card: str, mtime_ns: int, size: int) -> dict:
    from pathlib import Path

    try:
        return _front_matter(Path(card).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}


def _front_matter(text: str) -> dict:
    """A card's YAML front matter ({} when it has none or it is not YAML)."""
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    import yaml

    try:  # libyaml's loader when present: the same documents, ~7x faster on a 150 kB card
        front = yaml.load(text[3:end], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return {}
    return front if isinstance(front, dict) else {}


def _data_files(front: dict) -> dict[str, dict[str, list[str]]]:
    """``config -> {split: [file pattern, ...]}`` from a card's ``configs:`` (a bare pattern or
    list is the ``train`` split, as the datasets library reads it)."""
    out: dict[str, dict[str, list[str]]] = {}
    for cfg in front.get("configs") or []:
        if not isinstance(cfg, dict) or not isinstance(cfg.get("config_name"), str):
            continue
        files = cfg.get("data_files")
        per: dict[str, list[str]] = {}
        if isinstance(files, str):
            per["train"] = [files]
        elif isinstance(files, dict):
            per = {k: [v] if isinstance(v, str) else [x for x in v or [] if isinstance(x, str)]
                   for k, v in files.items() if isinstance(k, str)}
        elif isinstance(files, list):
            for f in files:
                if isinstance(f, dict):
                    paths = f.get("path")
                    per.setdefault(str(f.get("split", "train")), []).extend(
                        [paths] if isinstance(paths, str) else [x for x in paths or [] if isinstance(x, str)])
                elif isinstance(f, str):
                    per.setdefault("train", []).append(f)
        out[cfg["config_name"]] = per or {"train": []}
    return out


def config_rows(snap, config: str, split: str) -> list[dict] | None:
    """The rows of one config and split of a verified snapshot, read straight from its parquet
    files (the rows ``datasets.load_dataset`` gives, without building an Arrow cache: the bench
    reads one config per case), or None when the card does not name local parquet files for it
    (then use :func:`open_dataset`)."""
    table = config_table(snap, config, split)
    return None if table is None else table.to_pylist()


def config_table(snap, config: str, split: str):
    """:func:`config_rows` as one pyarrow table (None likewise)."""
    files = _data_files(_card_front_matter(snap.path)).get(config, {}).get(split)
    paths = [snap.path / f for f in files or []]
    if not paths or not all(f.endswith(".parquet") and not any(c in f for c in "*?[") for f in files) \
            or not all(p.is_file() for p in paths):
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pa.concat_tables([pq.read_table(p) for p in paths])
    except (OSError, pa.ArrowException) as exc:
        msg = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise CbenchError(f"{snap.repo_id}@{snap.tag or snap.sha[:12]}: cannot read the dataset "
                          f"({type(exc).__name__}{': ' + msg if msg else ''})") from None


def dataset_splits(path) -> dict[str, list[str]]:
    """``config -> [split, ...]`` from a dataset card's ``configs:`` front matter (README.md)."""
    return {c: list(per) for c, per in _data_files(_card_front_matter(path)).items()}


_CHECKED_ONCE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("cbench_checked_snapshots", default=None)


@contextlib.contextmanager
def snapshots_checked_once():
    """Within this block, a dataset's whole snapshot that :func:`config_snapshot` found cached and
    intact is not checked again when another config of it is asked for with the same arguments (a
    bench reads one config per case, all from one snapshot of ``cbench/counterfactuals``: its 250
    files were hashed 16 times for the main cases), and the zoo's release listing, which every pull
    reads to seed the default hub, is read once (:func:`cbench.hub.zoo.zoo_releases`). Outside
    such a block every call checks and reads."""
    from cbench.hub.zoo import LISTED_ONCE

    token = _CHECKED_ONCE.set({}) if _CHECKED_ONCE.get() is None else None
    listed = LISTED_ONCE.set({}) if LISTED_ONCE.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _CHECKED_ONCE.reset(token)
        if listed is not None:
            LISTED_ONCE.reset(listed)


def config_snapshot(name: str, config: str, revision: str | None = None, *, endpoint: str | None = None,
                    hub: str | os.PathLike | None = None, offline: bool | None = None,
                    cache_dir: str | os.PathLike | None = None):
    """The verified :class:`~cbench.hub.cache.Snapshot` holding one dataset config: the whole snapshot
    if it is cached, else the card and that config's data files only.

    Online, the card (``README.md``) is fetched first, its ``configs:`` entry names the data files,
    and only those are downloaded (``snapshot_download(allow_patterns=...)``) into a staging cache,
    checked against the hub's git blob ids, and moved into the cache's snapshot directory of that
    commit (a partial snapshot, as ``huggingface_hub`` leaves one), with a completion record per
    config and ``refs/<tag>``. Offline (or with the hub unreachable), the cached full snapshot or
    config at the revision resolved online is checked and returned."""
    from cbench.hub.cache import Cache
    from cbench.errors import CacheDamagedError, HubUnreachableError, UnknownRevisionError
    from cbench.hub.repos import RepoRef, sort_versions
    from cbench.hub.pull import _intact_cached, candidates, check_pins, from_cache, resolve
    from cbench.hub.remote import hf_offline, select_remote
    from cbench.hub.seeding import seed_default_hub

    cache = Cache(cache_dir)

    def offline_answer(reason: str):
        try:
            return from_cache(name, revision, "dataset", cache, reason=reason)
        except (HubUnreachableError, UnknownRevisionError) as exc:
            for repo_id in candidates(name, "dataset"):
                ref = RepoRef(repo_id, "dataset")
                sha = cache.resolve_config_offline(ref, revision, config)
                if sha is not None:
                    snap = _config_snap(cache, ref, sha, config)
                    if snap is None:
                        raise CacheDamagedError(f"the cached {repo_id}@{revision or sha[:12]} config {config} is "
                                                "damaged; run the same call with the hub reachable to fetch it "
                                                "again (`cbench cache verify` checks the whole cache)") from None
                    snap.extra["offline_reason"] = reason
                    return snap
                e = cache.entry(ref)
                if e.get("configs"):  # this repository is cached, this revision or config is not
                    tags = e.get("tags", {})
                    have = [t for t in sort_versions(tags) if config in e["configs"].get(tags[t], {})]
                    raise UnknownRevisionError(f"{reason}; {repo_id} {revision or ''} config {config} is not in "
                                               f"the cache (cached versions of it: {', '.join(have) or 'none'})"
                                               ) from None
            raise exc

    if offline if offline is not None else hf_offline():
        return offline_answer("offline (HF_HUB_OFFLINE=1)")
    checked = _CHECKED_ONCE.get()
    key = (name, revision, endpoint, None if hub is None else os.fspath(hub),
           None if cache_dir is None else os.fspath(cache_dir),
           tuple(os.environ.get(v) for v in ("CBENCH_HOME", "CBENCH_ENDPOINT", "CBENCH_HUB", "HF_ENDPOINT")))
    if checked is not None and key in checked and checked[key].path.is_dir():
        return checked[key]  # the whole snapshot, checked in this block
    remote = select_remote(endpoint, hub)
    if remote.default:
        seed_default_hub(remote.hub_dir, [RepoRef(r, "dataset") for r in candidates(name, "dataset")])
    try:
        res = resolve(name, revision, "dataset", remote)
    except HubUnreachableError as exc:
        return offline_answer(str(exc))
    cache.record_tags(res.ref, res.tags, replace=check_pins(res, cache, remote))
    cached = cache.snapshot(res.ref, res.sha) is not None or cache.config_record(res.ref, res.sha, config) is not None
    listing = remote.listing(res.ref, res.sha) if cached else None  # what is cached must match the hub's files
    full = _intact_cached(cache, res, listing)
    if full is not None and checked is not None:
        checked[key] = full
    if full is None:
        full = _config_snap(cache, res.ref, res.sha, config, res.tag, listing)
    if full is None:
        with cache.repo_lock(res.ref):
            full = _config_snap(cache, res.ref, res.sha, config, res.tag) or _fetch_config(cache, res, remote, config)
    cache.write_refs(res.ref, res.sha, res.ref_names())
    return full


def _config_snap(cache, ref, sha: str, config: str, tag: str | None = None, listing: dict | None = None):
    """The cached snapshot of ``sha`` if ``config`` was fetched into it and is intact (and, given
    the hub's ``listing`` of the commit, the files it lists)."""
    from cbench.hub.cache import Snapshot
    from cbench.hub.cache_verify import check_config

    rec = cache.config_record(ref, sha, config)
    if rec is None or not check_config(cache, ref, sha, config, listing).ok:
        return None
    if tag is None:
        tag = next((t for t, s in sorted(cache.entry(ref).get("tags", {}).items()) if s == sha), None)
    return Snapshot(ref.repo_id, ref.repo_type, sha, cache.snapshot_dir(ref, sha), tag, len(rec),
                    sum(v[0] for v in rec.values()), True, {"config": config})


def _fetch_config(cache, res, remote, config: str):
    """Download the card and ``config``'s files of ``res`` through a staging cache, verify them and
    move them into the cache. Call under the repository's lock."""
    from pathlib import Path

    from cbench.hub.cache import Snapshot, repo_folder_name
    from cbench.hub.cache_verify import record_of
    from cbench.hub.pull import _download_error, endpoint_of, verify_snapshot
    from cbench.hub.remote import _token_for

    with endpoint_of(remote) as ep:
        from huggingface_hub import hf_hub_download, snapshot_download

        with cache.staging() as staging:
            kw = dict(repo_type="dataset", revision=res.sha, endpoint=ep, cache_dir=str(staging), token=_token_for(ep))
            try:
                card = Path(hf_hub_download(res.ref.repo_id, "README.md", **kw))
                files = _config_files(card.read_text(encoding="utf-8"), config)
                if files is None:
                    configs = sorted(dataset_splits(card.parent))
                    raise UsageError(f"{res.ref.repo_id}@{res.tag or res.sha[:12]} has no config {config!r}"
                                     + (f"; configs: {', '.join(configs[:20])}{', ...' if len(configs) > 20 else ''}"
                                        if configs else ""))
                path = Path(snapshot_download(res.ref.repo_id, allow_patterns=["README.md", *files], **kw))
            except CbenchError:
                raise
            except Exception as exc:  # noqa: BLE001 - mapped to cbench errors
                raise _download_error(exc, res, ep) from None
            label = f"{res.ref.repo_id}@{res.tag or res.sha[:12]} config {config}"
            n, size = verify_snapshot(path, staging / repo_folder_name(res.ref) / "trees" / f"{res.sha}.json", label)
            record = record_of(path)
            final = cache.merge_files(staging, res.ref, res.sha)
    cache.mark_config_complete(res.ref, res.sha, config, record, res.tag)
    return Snapshot(res.ref.repo_id, "dataset", res.sha, final, res.tag, n, size, from_cache=False,
                    extra={"config": config})


def _config_files(card_text: str, config: str) -> list[str] | None:
    """The data-file patterns of ``config`` in a card's ``configs:`` (None if it has no such config)."""
    per = _data_files(_front_matter(card_text.lstrip())).get(config)
    files = [f for split in (per or {}).values() for f in split]
    return files or None
