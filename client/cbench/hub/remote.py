"""Where a pull talks to: a hub directory (served by olah on demand) or an endpoint URL, chosen
from the options and the environment (``--endpoint``, ``--hub``, ``CBENCH_ENDPOINT``,
``CBENCH_HUB``, ``HF_ENDPOINT``, else the per-user hub), and the huggingface_hub client for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cbench.errors import HubError, HubUnreachableError, UsageError
from cbench.hub.repos import Hub, RepoRef, default_hub_dir, git


def hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class Remote:
    """A hub directory (served by olah on demand) or an endpoint URL."""

    hub_dir: Path | None = None
    endpoint: str | None = None
    default: bool = False

    def __str__(self) -> str:
        return self.endpoint if self.endpoint else f"hub {self.hub_dir}"

    @property
    def hub(self) -> Hub:
        return Hub(self.hub_dir)

    def names(self, repo_type: str) -> list[str]:
        names = self.hub.repos(repo_type) if self.hub_dir is not None and self.hub.exists() else []
        if self.default:  # a lazily seeded hub: the zoo's repositories too
            from cbench.hub.zoo import zoo_releases

            names = sorted(set(names) | {r.repo_id for r in zoo_releases() if r.repo_type == repo_type})
        return names

    def refs(self, ref: RepoRef) -> dict[str, str] | None:
        """Tag -> sha, or None if the repository does not exist. HubUnreachableError if the hub
        cannot be asked."""
        both = self.refs_and_branches(ref)
        return None if both is None else both[0]

    def refs_and_branches(self, ref: RepoRef) -> tuple[dict[str, str], dict[str, str]] | None:
        """(tag -> sha, branch -> sha), or None if the repository does not exist."""
        if self.hub_dir is not None:
            if not self.hub.exists():
                raise HubUnreachableError(f"hub directory {self.hub_dir} does not exist")
            if not self.hub.has_repo(ref.repo_id, ref.repo_type):
                return None
            return self.hub.refs(ref.repo_id, ref.repo_type), self.hub.branches(ref.repo_id, ref.repo_type)
        api = _hf_api(self.endpoint)
        try:
            refs = api.list_repo_refs(ref.repo_id, repo_type=ref.repo_type)
        except Exception as exc:  # noqa: BLE001 - every failure is mapped below
            status = _http_status(exc)
            if status in (401, 404):  # olah answers 401 (or 404 on /refs) for a missing repository
                return None
            if status is not None:
                raise HubError(f"{self.endpoint} answered HTTP {status} for {ref.repo_id}") from None
            raise HubUnreachableError(f"cannot reach {self.endpoint} ({type(exc).__name__})") from None
        return {t.name: t.target_commit for t in refs.tags}, {b.name: b.target_commit for b in refs.branches}


    def repositories(self, repo_type: str) -> dict[str, dict[str, str]]:
        """Every repository of that type the hub lists, with its tags (tag -> commit):
        ``list_models``/``list_datasets`` then ``list_repo_refs`` of each, as any Hugging
        Face-compatible server answers them. HubUnreachableError when it cannot be asked."""
        if self.hub_dir is not None:
            return {r: self.hub.refs(r, repo_type) for r in self.names(repo_type)}
        from concurrent.futures import ThreadPoolExecutor

        _quiet_hf()
        from huggingface_hub.utils import (
            build_hf_headers,
            get_session,
            hf_raise_for_status,
        )

        # the listing pages one by one (huggingface.co's Link: rel="next"), without the retries
        # HfApi.list_models makes, so an unreachable server is said at once
        url, ids = f"{self.endpoint}/api/{repo_type}s", []
        try:
            while url:
                r = get_session().get(url, headers=build_hf_headers(token=_token_for(self.endpoint)), timeout=30)
                hf_raise_for_status(r)
                ids += [d["id"] for d in r.json() if isinstance(d, dict) and isinstance(d.get("id"), str)]
                url = r.links.get("next", {}).get("url")
        except Exception as exc:  # noqa: BLE001 - every failure is mapped below
            raise self._error(exc, f"the {repo_type}s") from None
        ids = sorted(set(ids))

        def tags(repo_id: str) -> dict[str, str]:
            both = self.refs_and_branches(RepoRef(repo_id, repo_type))
            return both[0] if both is not None else {}

        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(zip(ids, pool.map(tags, ids)))

    def _error(self, exc: Exception, what: str):
        status = _http_status(exc)
        if status is not None:
            return HubError(f"{self.endpoint} answered HTTP {status} when asked for {what}")
        return HubUnreachableError(f"cannot reach {self.endpoint} ({type(exc).__name__})")

    def listing(self, ref: RepoRef, sha: str) -> dict[str, set[str]]:
        """Every file of commit ``sha`` as the hub lists it now: path -> its ids (the git blob id,
        and for a Git LFS file its sha256, the etag ``huggingface_hub`` names the cached blob by).
        HubError when the hub cannot list it."""
        if self.hub_dir is not None:
            out = git(self.hub.repo_path(ref.repo_id, ref.repo_type), "ls-tree", "-r", "-z", sha)
            listing = {}
            for rec in out.split("\0"):
                meta, _, path = rec.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob":
                    listing[path] = {parts[2]}
            return listing
        api = _hf_api(self.endpoint)
        try:
            entries = list(api.list_repo_tree(ref.repo_id, revision=sha, repo_type=ref.repo_type, recursive=True))
        except Exception as exc:  # noqa: BLE001 - every failure is mapped below
            raise self._error(exc, f"the files of {ref.repo_id}@{sha[:12]}") from None
        listing = {}
        for e in entries:
            blob = getattr(e, "blob_id", None)
            if blob is None:  # a folder
                continue
            ids = {blob}
            lfs = getattr(e, "lfs", None)
            if lfs:
                ids.add(lfs["sha256"] if isinstance(lfs, dict) else lfs.sha256)
            listing[e.path] = ids
        return listing


def check_endpoint(endpoint: str, option: str = "--endpoint") -> str:
    """An http(s) URL with a host and a valid port, without trailing slash; UsageError otherwise."""
    from urllib.parse import urlsplit

    text = str(endpoint).strip()
    try:
        parts = urlsplit(text)
        port = parts.port  # ValueError for a port that is not a number in 0-65535
        host = parts.hostname
    except ValueError as exc:
        raise UsageError(f"{option} {endpoint!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"{option} {endpoint!r} is not an http(s):// URL")
    if not host:
        raise UsageError(f"{option} {endpoint!r} has no host; e.g. http://127.0.0.1:8090")
    if port == 0 or any(c.isspace() for c in text) or parts.query or parts.fragment:
        raise UsageError(f"{option} {endpoint!r} is not a server address such as http://127.0.0.1:8090")
    return text.rstrip("/")


def check_hub_dir(hub: str | os.PathLike, option: str = "--hub") -> Path:
    """An existing hub directory; UsageError otherwise (never a silent fall-back to the cache)."""
    text = os.fspath(hub)
    if not str(text).strip():
        raise UsageError(f"{option} is empty; give a hub directory")
    path = Path(text).expanduser()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise UsageError(f"{option} {path} {what}; give a hub directory (with models/<org>/<name> git "
                         "repositories), or --endpoint URL for a server")
    return path


def select_remote(endpoint: str | None = None, hub: str | os.PathLike | None = None) -> Remote:
    """Where to pull from; a malformed endpoint or a missing hub directory is a UsageError."""
    if endpoint is not None and hub is not None:
        raise UsageError("give either --endpoint or --hub, not both")
    if endpoint is not None:
        return Remote(endpoint=check_endpoint(endpoint))
    if hub is not None:
        return Remote(hub_dir=check_hub_dir(hub))
    if os.environ.get("CBENCH_ENDPOINT"):
        return Remote(endpoint=check_endpoint(os.environ["CBENCH_ENDPOINT"], "CBENCH_ENDPOINT"))
    if os.environ.get("CBENCH_HUB"):
        return Remote(hub_dir=check_hub_dir(os.environ["CBENCH_HUB"], "CBENCH_HUB"))
    if os.environ.get("HF_ENDPOINT", "").strip():  # as every huggingface_hub client reads it
        return Remote(endpoint=check_endpoint(os.environ["HF_ENDPOINT"], "HF_ENDPOINT"))
    return Remote(hub_dir=default_hub_dir(), default=True)


def _token_for(endpoint: str):
    """No token for loopback servers (never send a user's Hugging Face token to them); the
    user's own (``HF_TOKEN`` / ``hf auth login``) for anything else."""
    from urllib.parse import urlparse

    return False if urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1") else None


def _hf_api(endpoint: str):
    _quiet_hf()
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=_token_for(endpoint))


def _quiet_hf() -> None:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_XET", "1")


def _http_status(exc: Exception) -> int | None:
    resp = getattr(exc, "response", None)
    return getattr(resp, "status_code", None)


