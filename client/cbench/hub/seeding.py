"""Seeding a hub directory from the zoo: publish every zoo release the hub lacks (all of them, or
lazily just the repositories a command needs), safely under concurrent seeding.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from cbench.errors import HubError
from cbench.hub.publishing import PublishResult, publish
from cbench.hub.repos import Hub, RepoRef, default_hub_dir, parse_version, sort_versions
from cbench.hub.zoo import release_dates, release_key, zoo_releases

Progress = Callable[[int, int, RepoRef], None]


def ensure_seeded(hub_dir: str | os.PathLike | None = None, zoo: Path | None = None,
                  only: Iterable[RepoRef] | None = None, progress: Progress | None = None) -> list[PublishResult]:
    """Publish every zoo release the hub lacks, oldest version first per repository; with
    ``only``, just the releases of those repositories (lazy seeding: a command seeds what it
    needs, so the first ``cbench pull case-3`` on a fresh home publishes one repository, not the
    whole zoo).

    Each version is published with its recorded release date (:func:`release_dates`). Cheap when
    there is nothing to do (a stamp file records a full seeding; a lazy one compares the
    repository's tags). Safe when several processes seed at once (a file lock; the second finds
    the work done). A zoo version lower than what the hub already has is skipped, not an error.
    ``progress(k, n, ref)`` is called after each of the ``n`` repositories that needed publishing.
    """
    import json

    hub = Hub(hub_dir if hub_dir is not None else default_hub_dir())
    from cbench.hub.publishing import remove_stale_publish_temporaries

    remove_stale_publish_temporaries(hub.root)  # left by a pull killed while it seeded
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
        todo = {ref: _missing(hub, ref, versions) for ref, versions in releases.items()}
        todo = {ref: vs for ref, vs in todo.items() if vs}
        for k, (ref, missing) in enumerate(todo.items(), 1):
            for version in missing:
                done.append(publish(releases[ref][version], ref.repo_id, ref.repo_type, version, hub=hub.root,
                                    date=dates.get(release_key(ref, version))))
            if progress is not None:
                progress(k, len(todo), ref)
        if only is None:
            tmp = stamp.with_suffix(".tmp")
            tmp.write_text(json.dumps(wanted, sort_keys=True))
            os.replace(tmp, stamp)
    return done


def _missing(hub: Hub, ref: RepoRef, versions: dict) -> list[str]:
    """The zoo versions of ``ref`` the hub lacks, oldest first (none below its newest tag)."""
    have = set(hub.refs(ref.repo_id, ref.repo_type))
    newest = sort_versions(have)[-1] if have else None
    out = []
    for version in sort_versions(versions):
        if version in have or (newest and parse_version(version) < parse_version(newest)):
            continue
        out.append(version)
        newest = version
    return out


def seed_default_hub(hub_dir: Path, only=None, progress: Progress | None = None) -> None:
    """Seed the default hub from the zoo (``only``: just these repositories); a broken zoo
    release becomes one clear error."""
    from cbench.errors import PublishError

    try:
        Path(hub_dir).mkdir(parents=True, exist_ok=True)
        ensure_seeded(hub_dir, only=only, progress=progress)
    except OSError as exc:
        raise HubError(f"cannot create the default hub {hub_dir}: {exc.strerror or exc}; set CBENCH_HOME "
                       "or use --hub DIR") from None
    except PublishError as exc:
        raise HubError(f"seeding the default hub {hub_dir} from model_zoo/releases failed: {exc}") from None


