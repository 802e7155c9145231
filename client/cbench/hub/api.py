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
``GET /api/models``, ``GET /api/datasets``                  the repositories that match
                                                            ``search``, ``author``, ``filter``
                                                            (tags, all of them), ``pipeline_tag``,
                                                            ``library``; ``sort``, ``limit``,
                                                            ``full``
``GET /api/{models,datasets}/{org}/{name}/commits/{rev}``   the commits reachable from ``rev``
``GET /api/whoami-v2``                                      401, as huggingface.co answers a
                                                            token it does not know (the local hub
                                                            has no accounts)
``GET /``                                                   a short page naming the hub
==========================================================  ===================================

A revision is what huggingface.co accepts: a branch or tag name, a full ref name
(``refs/heads/main``, ``refs/tags/v1.0.0``, sent URL-encoded as ``refs%2Ftags%2Fv1.0.0``) or a
40-hex commit sha; nothing else (no ``main~1``, no short sha). Requests olah passes on
(downloads, ``/tree``, ``/paths-info``) reach olah with a full ref name already resolved to its
commit, since olah reads the path decoded and would split the ref name at its slashes.

Repository info has huggingface.co's fields: ``id``, ``sha``, ``lastModified`` and
``createdAt`` (the git commit dates: the release dates, see :func:`cbench.hub.zoo.release_dates`),
``siblings`` with ``rfilename``, ``size`` and ``blobId``, ``cardData``, ``tags``,
``library_name``, ``pipeline_tag`` (from the card's front matter).

Errors carry huggingface.co's ``X-Error-Code`` header, which ``huggingface_hub`` maps to its
exceptions: a missing repository answers 404 ``RepoNotFound`` (RepositoryNotFoundError, so
``repo_exists`` is False), a missing revision 404 ``RevisionNotFound``, a missing file or folder
404 ``EntryNotFound``; downloads (``/resolve/``), ``/tree``, ``/paths-info`` (POST too) and
``/refs`` are checked the same way before olah sees them.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qs, unquote

from cbench.hub.repos import SHA_RE, Hub, _git_env, git

_TYPES = {"models": "model", "datasets": "dataset"}
_REPO = r"(?P<org>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
# matched against the raw (still URL-encoded) path: a revision such as refs%2Ftags%2Fv1.0.0 is one
# path segment there, and several once decoded
_API_INFO = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}(?:/revision/(?P<rev>[^/]+))?/?$")
_API_COMMITS = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/commits/(?P<rev>[^/]+)/?$")
_API_LIST = re.compile(r"^/api/(?P<type>models|datasets)/?$")
_API_REV = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/(?P<kind>tree|paths-info)/(?P<rev>[^/]+)"
                      r"(?:/(?P<path>.*))?$")
_API_REFS = re.compile(rf"^/api/(?P<type>models|datasets)/{_REPO}/refs/?$")
_RESOLVE = re.compile(rf"^/(?:(?P<type>datasets)/)?{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_WHOAMI = re.compile(r"^/api/whoami(?:-v2)?/?$")
# a branch or tag name as git and huggingface.co allow it (no ~ ^ : or .., which git would read
# as revision expressions)
_REF_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
# huggingface.co's answer to a token it does not know (and the local hub knows none)
INVALID_TOKEN = "Invalid credentials in Authorization header"


class HubError404(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class HubRepos:
    """What the API layer reads from a hub directory's git repositories."""

    def __init__(self, hub_dir: str | os.PathLike):
        self.hub = Hub(hub_dir)
        # repository info per (type, id, commit, full): a commit's files, card and dates never change,
        # so a listing of every repository costs one ref read per repository once it is warm
        self._info: dict[tuple, dict] = {}
        self._info_lock = threading.Lock()

    def path(self, repo_type: str, repo_id: str) -> Path:
        if not self.hub.has_repo(repo_id, repo_type):
            raise HubError404("RepoNotFound", f"Repository {repo_id} not found")
        return self.hub.repo_path(repo_id, repo_type)

    def resolve(self, repo: Path, revision: str, repo_id: str) -> str:
        """A branch, tag, full ref name (``refs/heads/...``, ``refs/tags/...``) or commit sha ->
        commit sha; RevisionNotFound for anything else, as huggingface.co answers."""
        revision = unquote(revision)
        if revision == "main":  # the listing's and most clients' revision: read without a git process
            sha = _branch_sha(repo, "main")
            if sha:
                return sha
        if SHA_RE.match(revision):
            candidates = [revision]
        elif not _REF_NAME.match(revision) or ".." in revision or revision.endswith(".lock"):
            candidates = []
        elif revision.startswith("refs/"):
            candidates = [revision] if revision.startswith(("refs/heads/", "refs/tags/")) else []
        else:
            candidates = [f"refs/heads/{revision}", f"refs/tags/{revision}"]
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

    def object_type(self, repo: Path, sha: str, path: str) -> str | None:
        """``blob``, ``tree`` or None: what ``path`` is at commit ``sha``."""
        path = path.strip("/")
        if not path:
            return "tree"
        proc = subprocess.run(["git", "-C", str(repo), "cat-file", "-t", f"{sha}:{path}"], check=False, capture_output=True,
                              env=_git_env())
        return (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None

    def has_file(self, repo: Path, sha: str, path: str) -> bool:
        return self.object_type(repo, sha, path) == "blob"

    def commit_date(self, repo: Path, rev: str, first: bool = False) -> str:
        args = ["log", "--format=%cI", "--reverse", rev] if first else ["show", "-s", "--format=%cI", rev]
        out = git(repo, *args).splitlines()
        return _iso_z(out[0]) if out else None

    def card_data(self, repo: Path, sha: str) -> dict | None:
        proc = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{sha}:README.md"], check=False, capture_output=True,
                              env=_git_env())
        if proc.returncode != 0:
            return None
        text = proc.stdout.decode("utf-8", errors="replace")
        m = re.match(r"^\s*---\s*\n(.*?)\n---\s*(\n|$)", text, flags=re.DOTALL)
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
        key = (repo_type, repo_id, sha, bool(full))
        with self._info_lock:
            known = self._info.get(key)
        if known is not None:
            return copy.deepcopy(known)
        doc = self._info_at(repo_type, repo_id, repo, sha, full)
        with self._info_lock:
            if len(self._info) >= INFO_CACHE_SIZE:
                self._info.pop(next(iter(self._info)))
            self._info[key] = doc
        return copy.deepcopy(doc)

    def warm(self) -> None:
        """Fill the info cache for every repository (both listings), so that the first
        ``list_models()`` a client makes is answered as fast as the later ones."""
        for repo_type in ("model", "dataset"):
            try:
                self.listing(repo_type, {"full": ["true"]})
                self.listing(repo_type, {})
            except Exception:  # noqa: BLE001 - warming is an optimisation; a request says what is wrong
                return

    def _info_at(self, repo_type: str, repo_id: str, repo: Path, sha: str, full: bool) -> dict:
        card = self.card_data(repo, sha) or {}
        tags = [t for t in (card.get("tags") or []) if isinstance(t, str)]
        lic = card.get("license")
        if isinstance(lic, str) and f"license:{lic}" not in tags:
            tags.append(f"license:{lic}")
        for key in ("library_name", "pipeline_tag"):  # huggingface.co lists both among the tags
            if repo_type == "model" and isinstance(card.get(key), str) and card[key] not in tags:
                tags.append(card[key])
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
        """``GET /api/models`` (``/api/datasets``): the repositories matching every given
        ``search`` (substrings of the id, any case), ``author``, ``filter`` (tags; a repository
        must carry all of them), ``pipeline_tag`` and ``library``, in ``sort`` order (``id``,
        ``lastModified``, ``createdAt``; ``direction=-1`` reverses; huggingface.co's other keys
        such as ``downloads`` are all 0 here and keep the id order), at most ``limit``."""
        searches = [v.lower() for v in query.get("search") or [] if v]
        author = (query.get("author") or [None])[0]
        wanted = {v for v in query.get("filter") or [] if v}
        for key in ("pipeline_tag", "library"):
            wanted |= {v for v in query.get(key) or [] if v}
        full = (query.get("full") or ["false"])[0].lower() in ("1", "true")
        try:
            limit = max(int((query.get("limit") or [0])[0]), 0) or None
        except ValueError:
            limit = None
        sort = (query.get("sort") or [None])[0]
        descending = (query.get("direction") or ["1"])[0] == "-1"
        out = []
        for repo_id in self.hub.repos(repo_type):
            if any(s not in repo_id.lower() for s in searches):
                continue
            if author and repo_id.split("/")[0].lower() != author.lower():
                continue
            try:
                doc = self.info(repo_type, repo_id, None, full=full)
            except HubError404:  # a repository without main (nothing published yet)
                continue
            if wanted and not wanted <= set(doc["tags"]):
                continue
            out.append(doc)
            if limit and len(out) >= limit and sort in (None, "id"):
                break
        if sort in ("lastModified", "createdAt"):
            out.sort(key=lambda d: d.get(sort) or "", reverse=not descending)  # newest first, as the Hub
        elif descending:
            out.reverse()
        return out[:limit] if limit else out

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

    def check_folder(self, repo_type: str, repo_id: str, revision: str, path: str) -> str:
        """The commit of ``revision``; EntryNotFound when ``path`` is not a folder of it
        (huggingface.co answers a tree listing of a missing folder so)."""
        repo = self.path(repo_type, repo_id)
        sha = self.resolve(repo, revision, repo_id)
        kind = self.object_type(repo, sha, unquote(path))
        if kind != "tree":
            what = "is a file, not a folder," if kind == "blob" else "does not exist"
            raise HubError404("EntryNotFound", f"{unquote(path)} {what} on {unquote(revision)!r} of {repo_id}")
        return sha

    def check_file(self, repo_type: str, repo_id: str, revision: str, path: str) -> str:
        """The commit of ``revision``; EntryNotFound when ``path`` is not a file of it."""
        repo = self.path(repo_type, repo_id)
        sha = self.resolve(repo, revision, repo_id)
        if not self.has_file(repo, sha, unquote(path)):
            raise HubError404("EntryNotFound", f"{unquote(path)} does not exist on {unquote(revision)!r} of {repo_id}")
        return sha

    def byte_range(self, repo_type: str, repo_id: str, sha: str, path: str, header: str):
        """A download with an HTTP ``Range`` header, answered as huggingface.co does: 206 with
        ``Content-Range`` for one satisfiable range (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``),
        416 with ``Content-Range: bytes */size`` when none of it lies in the file, and None (olah
        sends the whole file, 200, as RFC 9110 allows) for a header it does not parse or several
        ranges. What ``datasets``' streaming reads parquet footers with."""
        from starlette.responses import Response

        repo = self.path(repo_type, repo_id)
        blob = git(repo, "rev-parse", f"{sha}:{path}")
        size = int(git(repo, "cat-file", "-s", blob))
        span = parse_range(header, size)
        headers = {"Accept-Ranges": "bytes", "ETag": blob, "X-Repo-Commit": sha}
        if span is None:
            return None
        if span == ():
            return Response(status_code=416, headers=dict(headers, **{"Content-Range": f"bytes */{size}"}))
        start, end = span
        data = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", blob], check=True, capture_output=True,
                              env=_git_env()).stdout[start:end + 1]
        return Response(content=data, status_code=206, media_type="application/octet-stream",
                        headers=dict(headers, **{"Content-Range": f"bytes {start}-{end}/{size}"}))

    def home(self) -> str:
        """``GET /``: what this server is (huggingface.co answers its home page)."""
        import html

        models, datasets = self.hub.repos("model"), self.hub.repos("dataset")
        return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>cbench local hub</title></head><body>"
                f"<h1>cbench local hub</h1><p>{len(models)} models and {len(datasets)} datasets from "
                f"<code>{html.escape(str(self.hub.root))}</code>, over the Hugging Face Hub API "
                "(<code>/api/models</code>, <code>/api/datasets</code>).</p></body></html>\n")


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


def parse_range(header: str, size: int) -> tuple[int, int] | tuple[()] | None:
    """``(first, last)`` byte of a single-range ``Range`` header over a file of ``size`` bytes;
    ``()`` when it is unsatisfiable (starts past the end, or a zero-length suffix); None when
    it is not one range this parses (then the whole file is the answer)."""
    m = _RANGE.match(header or "")
    if not m or (not m[1] and not m[2]):
        return None
    if not m[1]:  # suffix: the last n bytes
        n = int(m[2])
        return (max(size - n, 0), size - 1) if n > 0 and size > 0 else ()
    first = int(m[1])
    last = int(m[2]) if m[2] else None
    if last is not None and last < first:
        return None
    if first >= size:
        return ()
    return first, size - 1 if last is None else min(last, size - 1)


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


INFO_CACHE_SIZE = 8192


def _branch_sha(repo: Path, branch: str) -> str | None:
    """The commit of ``refs/heads/<branch>`` read from the repository's files (the loose ref, else
    packed-refs; a branch always names a commit), or None to ask git."""
    git_dir = repo / ".git"
    try:
        sha = (git_dir / "refs" / "heads" / branch).read_text().strip()
        return sha if SHA_RE.match(sha) else None
    except OSError:
        pass
    try:
        for line in (git_dir / "packed-refs").read_text().splitlines():
            parts = line.split(" ")
            if len(parts) == 2 and parts[1] == f"refs/heads/{branch}" and SHA_RE.match(parts[0]):
                return parts[0]
    except OSError:
        pass
    return None


def _iso_z(date: str) -> str:
    """git's ISO 8601 date (``2026-11-22T01:48:37+00:00``) as huggingface.co writes it."""
    from datetime import datetime, timezone

    d = datetime.fromisoformat(date).astimezone(timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class HubApi:
    """ASGI app: the calls above answered from ``hub_dir``; everything else goes to ``app``."""

    def __init__(self, app, hub_dir: str | os.PathLike, warm: bool = True):
        self.app = app
        self.repos = HubRepos(hub_dir)
        if warm:  # the listings' info, read while the server starts answering
            threading.Thread(target=self.repos.warm, name="cbench-hub-warm", daemon=True).start()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD", "POST"):
            from starlette.concurrency import run_in_threadpool

            response, scope = await run_in_threadpool(self.answer, scope)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def answer(self, scope) -> tuple[object | None, dict]:
        """(A Starlette response, scope) for the calls this layer owns or refuses; else (None,
        scope) for olah to answer, the scope's revision rewritten to its commit when olah could
        not read it (a full ref name)."""
        from starlette.responses import HTMLResponse, JSONResponse

        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else scope["path"]
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        post = scope["method"] == "POST"
        try:
            m = _API_REV.match(path)
            if m:
                repo_type, repo_id = _TYPES[m["type"]], f"{m['org']}/{m['name']}"
                if m["kind"] == "tree" and m["path"] and not post:
                    sha = self.repos.check_folder(repo_type, repo_id, m["rev"], m["path"])
                else:
                    sha = self.repos.check_revision(repo_type, repo_id, m["rev"])
                return None, _at_commit(scope, m, sha)
            if post:
                return None, scope
            if path in ("", "/"):
                return HTMLResponse(self.repos.home()), scope
            if _WHOAMI.match(path):
                return _error(scope, 401, "", INVALID_TOKEN), scope
            m = _API_LIST.match(path)
            if m:
                return JSONResponse(self.repos.listing(_TYPES[m["type"]], query)), scope
            m = _API_INFO.match(path)
            if m:
                return JSONResponse(self.repos.info(_TYPES[m["type"]], f"{m['org']}/{m['name']}", m["rev"])), scope
            m = _API_COMMITS.match(path)
            if m:
                return JSONResponse(self.repos.commits(_TYPES[m["type"]], f"{m['org']}/{m['name']}", m["rev"])), scope
            m = _API_REFS.match(path)
            if m:
                self.repos.path(_TYPES[m["type"]], f"{m['org']}/{m['name']}")
                return None, scope
            m = _RESOLVE.match(path)
            if m:
                repo_type = "dataset" if m["type"] else "model"
                sha = self.repos.check_file(repo_type, f"{m['org']}/{m['name']}", m["rev"], m["path"])
                wanted = _header(scope, b"range")
                if wanted is not None and scope["method"] == "GET":  # olah ignores Range: answered here
                    answer = self.repos.byte_range(repo_type, f"{m['org']}/{m['name']}", sha, unquote(m["path"]),
                                                   wanted)
                    if answer is not None:
                        return answer, scope
                return None, _at_commit(scope, m, sha)
        except HubError404 as exc:
            return _error(scope, 404, exc.code, exc.message), scope
        return None, scope


def _error(scope, status: int, code: str, message: str):
    """huggingface.co's error answer: ``X-Error-Code`` (what ``huggingface_hub`` maps to its
    exception classes), ``X-Error-Message``, and ``{"error": message}``."""
    from starlette.responses import JSONResponse, Response

    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    if scope["method"] == "HEAD":
        return Response(status_code=status, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _at_commit(scope: dict, m: re.Match, sha: str | None) -> dict:
    """``scope`` with a full ref name in the path (``refs%2Ftags%2Fv1.0.0``) replaced by its
    commit; any other revision is left for olah as it came."""
    if sha is None or "/" not in unquote(m["rev"]):
        return scope
    raw = scope.get("raw_path") or scope["path"].encode("latin-1")
    start, end = m.span("rev")
    new_raw = raw[:start] + sha.encode() + raw[end:]
    return dict(scope, raw_path=new_raw, path=unquote(new_raw.decode("latin-1")))


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
