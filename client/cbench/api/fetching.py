"""``cbench.pull``: a case or dataset from the hub into the verified local cache (``cbench pull``)."""

from __future__ import annotations

import json
import os

from cbench.api.results import PullResult
from cbench.errors import UsageError


def pull(spec: str, revision: str | None = None, *, repo_type: str = "model", endpoint: str | None = None,
         hub: str | os.PathLike | None = None, accept_moved_tag: bool = False) -> PullResult:
    """Download ``spec`` (``"case-3"``, ``"tracr-case-3"``, ``"case-3@v2.0.0"``,
    ``"cbench/case-3@<sha>"``; ``repo_type="dataset"`` for ``"counterfactuals"``), verify every
    file, keep it in the cache (``$CBENCH_HOME/cache``) and return where it is.

    ``revision``: a version tag or commit (default the newest version). ``endpoint``: a Hugging
    Face-compatible server (default ``CBENCH_ENDPOINT``, else the hub directory ``hub`` or
    ``CBENCH_HUB``, else the per-user hub seeded from the zoo). Offline (``HF_HUB_OFFLINE=1``) the
    answer comes from the cache. A version tag that now names another commit than the one
    recorded is refused unless ``accept_moved_tag``.

    >>> cbench.pull("case-3").revision                                # doctest: +SKIP
    'v2.0.0'
    """
    from cbench.hub.pull import pull as do_pull

    from cbench.api.arguments import flag

    if repo_type not in ("model", "dataset"):
        raise UsageError(f"repo_type must be 'model' or 'dataset' (got {repo_type!r})")
    flag("accept_moved_tag", accept_moved_tag)
    snap = do_pull(spec, revision, repo_type=repo_type, endpoint=endpoint, hub=hub,
                   accept_moved_tag=accept_moved_tag)
    case = None
    if repo_type == "model":
        try:
            case = json.loads((snap.path / "meta.json").read_text(encoding="utf-8")).get("case")
        except (OSError, ValueError, AttributeError):
            case = None
    return PullResult(repo_id=snap.repo_id, repo_type=snap.repo_type, revision=snap.tag or snap.sha, commit=snap.sha,
                      path=snap.path, files=int(snap.files), size=int(snap.size), from_cache=bool(snap.from_cache),
                      case=None if case is None else str(case))
