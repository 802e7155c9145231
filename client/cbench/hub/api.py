"""The Hub API as huggingface.co answers it, in front of olah, for a local hub directory.

olah serves a hub directory's git repositories over the Hugging Face protocol (downloads,
``/tree``, ``/paths-info``, ``/refs``) but answers several Hub API calls differently from
huggingface.co (see :mod:`cbench.hub.server`). :class:`HubApi` is an ASGI layer run in the olah
process (``python -m cbench.hub.api``) that answers those calls itself, from the git
repositories, and passes everything else to olah:

==========================================================  ===================================
request                                                     answered with
==========================================================  ===================================
``GET /api/{models,datasets}/{org}/{name}``                 repository info at ``main``
``GET /api/{models,datasets}/{org}/{name}/revision/{rev}``  repository info at ``rev``
``GET /api/models``, ``GET /api/datasets``                  every repository (``search``,
                                                            ``author``, ``limit``, ``full``)
``GET /api/{models,datasets}/{org}/{name}/commits/{rev}``   the commits reachable from ``rev``
==========================================================  ===================================

Repository info has huggingface.co's fields: ``id``, ``sha``, ``lastModified`` and
``createdAt`` (the git commit dates: the release dates, see :func:`cbench.hub.zoo.release_dates`),
``siblings`` with ``rfilename``, ``size`` and ``blobId``, ``cardData``, ``tags``,
``library_name``, ``pipeline_tag`` (from the card's front matter).

Errors carry huggingface.co's ``X-Error-Code`` header, which ``huggingface_hub`` maps to its
exceptions: a missing repository answers 404 ``RepoNotFound`` (RepositoryNotFoundError, so
``repo_exists`` is False), a missing revision 404 ``RevisionNotFound``, a missing file 404
``EntryNotFound``; downloads (``/resolve/``), ``/tree``, ``/paths-info`` and ``/refs`` are
checked the same way before olah sees them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote

from cbench.hub.repos import SHA_RE, Hub, git, _git_env

_TYPES = {"models": "model", "datasets": "dataset"}
_REPO = r"(?P<org>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
_API_INFO = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}(?:/revision/(?P<rev>[^/]+))?/?$")
_API_COMMITS = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/commits/(?P<rev>[^/]+)/?$")
_API_LIST = re.compile(r"^/api/(?P<type>models|datasets)/?$")
_API_REV = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/(?:tree|paths-info)/(?P<rev>[^/]+)(?:/.*)?$")
_API_REFS = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/refs/?$")
_RESOLVE = re.compile(rf"^/(?:(?P<type>datasets)/)?{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


class HubError404(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class HubRepos:
    """What the API layer reads from a hub directory's git repositories."""

    def __init__(self, hub_dir: str | os.PathLike):
        self.hub = Hub(hub_dir)

    def path(self, repo_type: str, repo_id: str) -> Path:
        if not self.hub.has_repo(repo_id, repo_type):
            raise HubError404("RepoNotFound", f"Repository {repo_id} not found")
        return self.hub.repo_path(repo_id, repo_type)

    def resolve(self, repo: Path, revision: str, repo_id: str) -> str:
        """A branch, tag or commit sha -> commit sha; RevisionNotFound otherwise."""
        revision = unquote(revision)
        candidates = [revision] if SHA_RE.match(revision) else [f"refs/heads/{revision}", f"refs/tags/{revision}"]
        if revision.startswith("refs/"):
            candidates = [revision]
        for cand in candidates:
            sha = git(repo, "rev-parse", "-q", "--verify", f"{cand}^{{commit}}", check=False)
            if SHA_RE.match(sha):
                return sha
        raise HubError404("RevisionNotFound", f"Invalid rev id: {revision} for {repo_id}")

    def files(self, repo: Path, sha: str) -> list[dict]:
        out = git(repo, "ls-tree", "-r", "-l", "-z", sha)
        siblings = []
        for rec in out.split("\0"):
            if not rec:
                continue
            meta, _, path = rec.partition("\t")
            _mode, kind, blob, size = meta.split()
            if kind == "blob":
                siblings.append({"rfilename": path, "size": int(size), "blobId": blob})
        return siblings

    def has_file(self, repo: Path, sha: str, path: str) -> bool:
        return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{sha}:{path}"], capture_output=True,
                              env=_git_env()).returncode == 0

    def commit_date(self, repo: Path, rev: str, first: bool = False) -> str:
        args = ["log", "--format=%cI", "--reverse", rev] if first else ["show", "-s", "--format=%cI", rev]
        out = git(repo, *args).splitlines()
        return _iso_z(out[0]) if out else None

    def card_data(self, repo: Path, sha: str) -> dict | None:
        proc = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{sha}:README.md"], capture_output=True,
                              env=_git_env())
        if proc.returncode != 0:
            return None
        text = proc.stdout.decode("utf-8", errors="replace")
        m = re.match(r"^\s*---\s*\n(.*?)\n---\s*(\n|$)", text, flags=re.S)
        if not m:
            return None
        import yaml

        try:
            data = yaml.safe_load(m.group(1))
        except yaml.YAMLError:
            return None
        return data if isinstance(data, dict) else None

    # -------------------------------------------------------------- answers
    def info(self, repo_type: str, repo_id: str, revision: str | None, full: bool = True) -> dict:
        repo = self.path(repo_type, repo_id)
        sha = self.resolve(repo, revision or "main", repo_id)
        card = self.card_data(repo, sha) or {}
        tags = [t for t in (card.get("tags") or []) if isinstance(t, str)]
        lic = card.get("license")
        if isinstance(lic, str) and f"license:{lic}" not in tags:
            tags.append(f"license:{lic}")
        doc = {
            "_id": sha[:24], "id": repo_id, "author": repo_id.split("/")[0], "sha": sha,
            "lastModified": self.commit_date(repo, sha), "createdAt": self.commit_date(repo, sha, first=True),
            "private": False, "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": tags,
            "cardData": card or None,
        }
        if repo_type == "model":
            doc["modelId"] = repo_id
            doc["library_name"] = card.get("library_name")
            doc["pipeline_tag"] = card.get("pipeline_tag")
        if full:
            doc["siblings"] = self.files(repo, sha)
        return doc

    def listing(self, repo_type: str, query: dict) -> list[dict]:
        search = (query.get("search") or [""])[0].lower()
        author = (query.get("author") or [None])[0]
        full = (query.get("full") or ["false"])[0].lower() in ("1", "true")
        try:
            limit = int((query.get("limit") or [0])[0]) or None
        except ValueError:
            limit = None
        out = []
        for repo_id in self.hub.repos(repo_type):
            if search and search not in repo_id.lower():
                continue
            if author and repo_id.split("/")[0] != author:
                continue
            try:
                out.append(self.info(repo_type, repo_id, None, full=full))
            except HubError404:  # a repository without main (nothing published yet)
                continue
            if limit and len(out) >= limit:
                break
        return out

    def commits(self, repo_type: str, repo_id: str, revision: str) -> list[dict]:
        repo = self.path(repo_type, repo_id)
        sha = self.resolve(repo, revision, repo_id)
        out = git(repo, "log", "--format=%H%x1f%an%x1f%cI%x1f%s%x1f%B%x1e", sha)
        commits = []
        for rec in out.split("\x1e"):
            rec = rec.strip("\n")
            if not rec:
                continue
            commit, author, date, title, message = rec.split("\x1f")
            commits.append({"id": commit, "title": title, "message": message.strip(),
                            "authors": [{"user": author, "avatar": None}], "date": _iso_z(date)})
        return commits

    def check_revision(self, repo_type: str, repo_id: str, revision: str | None) -> str | None:
        repo = self.path(repo_type, repo_id)
        return self.resolve(repo, revision, repo_id) if revision is not None else None

    def check_file(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        repo = self.path(repo_type, repo_id)
        sha = self.resolve(repo, revision, repo_id)
        if not self.has_file(repo, sha, unquote(path)):
            raise HubError404("EntryNotFound", f"{unquote(path)} does not exist on {revision!r} of {repo_id}")


def _iso_z(date: str) -> str:
    """git's ISO 8601 date (``2026-11-22T01:48:37+00:00``) as huggingface.co writes it."""
    from datetime import datetime, timezone

    d = datetime.fromisoformat(date).astimezone(timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class HubApi:
    """ASGI app: the calls above answered from ``hub_dir``; everything else goes to ``app``."""

    def __init__(self, app, hub_dir: str | os.PathLike):
        self.app = app
        self.repos = HubRepos(hub_dir)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            from starlette.concurrency import run_in_threadpool

            response = await run_in_threadpool(self.answer, scope)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def answer(self, scope):
        """A Starlette response for the calls this layer owns (or whose arguments are wrong), else
        None (olah answers)."""
        from starlette.responses import JSONResponse, Response

        path = scope["path"]
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            m = _API_LIST.match(path)
            if m:
                return JSONResponse(self.repos.listing(_TYPES[m["type"]], query))
            m = _API_INFO.match(path)
            if m:
                return JSONResponse(self.repos.info(_TYPES[m["type"]], f"{m['org']}/{m['name']}", m["rev"]))
            m = _API_COMMITS.match(path)
            if m:
                return JSONResponse(self.repos.commits(_TYPES[m["type"]], f"{m['org']}/{m['name']}", m["rev"]))
            m = _API_REV.match(path)
            if m:
                self.repos.check_revision(_TYPES[m["type"]], f"{m['org']}/{m['name']}", m["rev"])
                return None
            m = _API_REFS.match(path)
            if m:
                self.repos.path(_TYPES[m["type"]], f"{m['org']}/{m['name']}")
                return None
            m = _RESOLVE.match(path)
            if m:
                repo_type = "dataset" if m["type"] else "model"
                self.repos.check_file(repo_type, f"{m['org']}/{m['name']}", m["rev"], m["path"])
                return None
        except HubError404 as exc:
            headers = {"X-Error-Code": exc.code, "X-Error-Message": exc.message}
            if scope["method"] == "HEAD":
                return Response(status_code=404, headers=headers)
            return JSONResponse({"error": exc.message}, status_code=404, headers=headers)
        return None


def main(argv: list[str] | None = None) -> None:
    """``python -m cbench.hub.api --config OLAH_TOML --hub DIR --log-path DIR``: olah with the
    API layer in front, on the host and port the configuration names."""
    import argparse

    parser = argparse.ArgumentParser(description="olah with cbench's Hub API layer")
    parser.add_argument("--config", required=True)
    parser.add_argument("--hub", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-path", default="./logs")
    args = parser.parse_args(argv)
    # olah reads its configuration from the environment when imported (its worker-process path)
    os.environ["OLAH_CONFIG"] = args.config
    os.environ["OLAH_LOG_PATH"] = args.log_path
    import uvicorn
    from olah.server import app

    uvicorn.run(HubApi(app, args.hub), host=args.host, port=args.port, log_level="warning", reload=False)


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
