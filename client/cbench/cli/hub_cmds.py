"""Hub commands: ``publish``, ``hub serve``, ``pull``, ``list``, ``info``, ``import-interpbench``.

Every failure is a :class:`~cbench.errors.CbenchError` (one line, non-zero exit). ``info`` of a
cached case imports neither torch, TransformerLens nor datasets: it reads JSON from the snapshot.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import click

from cbench.cli.options import check_out_dir
from cbench.errors import CbenchError, HubError

_type_option = click.option("--type", "repo_type", type=click.Choice(["model", "dataset"]), default="model",
                            show_default=True, help="repository type")
_endpoint_option = click.option("--endpoint", default=None, metavar="URL",
                                help="a Hugging Face-compatible server to talk to (env CBENCH_ENDPOINT)")
_hub_option = click.option("--hub", "hub_dir", default=None, metavar="DIR",
                           help="a hub directory to use instead of the default per-user hub (env CBENCH_HUB)")


def _echo_json(doc) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


def _read_json_file(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _size(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} bytes"  # pragma: no cover


def _card_summary(readme: str | None) -> str | None:
    """The first paragraph of a card's body (front matter and headings skipped)."""
    if not readme:
        return None
    text = re.sub(r"^\s*---\n.*?\n---\s*\n", "", readme, count=1, flags=re.DOTALL)
    for para in re.split(r"\n\s*\n", text):
        lines = [l.strip() for l in para.strip().splitlines() if l.strip() and not l.lstrip().startswith("#")]
        if lines:
            return " ".join(lines)
    return None


# ---------------------------------------------------------------------------- publish
@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--repo", "repo_id", required=True, metavar="ORG/NAME", help="repository, e.g. cbench/case-3")
@_type_option
@click.option("--version", "version", required=True, metavar="vX.Y.Z", help="the version tag to create")
@click.option("--hub", "hub", default=None, metavar="DIR|URL",
              help="hub directory (default: the per-user hub) or an http(s) endpoint (uses HfApi)")
@click.option("--token", default=None, envvar="HF_TOKEN", help="token for an http(s) hub")
@click.option("--date", default=None, metavar="ISO8601",
              help="release date of the commit and tag, e.g. 2026-11-22T01:48:37Z (default: a fixed date "
                   "derived from the version, so republishing gives the same sha)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
def publish(directory, repo_id, repo_type, version, hub, token, date, as_json):
    """Validate DIRECTORY and publish it as VERSION of a hub repository (commit + annotated tag)."""
    from cbench.hub.publishing import publish as do_publish

    result = do_publish(directory, repo_id, repo_type, version, hub=hub, token=token, date=date)
    if as_json:
        _echo_json({"repo": result.repo_id, "type": result.repo_type, "version": result.version,
                    "commit": result.commit, "hub": result.target})
        return
    click.echo(result.describe())


# ---------------------------------------------------------------------------- hub serve
@click.group()
def hub():
    """Run the local hub server."""


@hub.command()
@click.option("--hub", "hub_dir", default=None, metavar="DIR", help="hub directory (default: the per-user hub)")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="port on 127.0.0.1 (default: a free one)")
def serve(hub_dir, port):
    """Serve a hub directory over the Hugging Face protocol (olah, offline) on 127.0.0.1.

    The default hub is seeded from the zoo in the background while it is served (what is seeded
    is served at once; a fresh home answers in about 2 s instead of after ~25 s of seeding)."""
    from cbench.hub.remote import check_hub_dir
    from cbench.hub.repos import default_hub_dir
    from cbench.hub.server import HubServer

    seeding = hub_dir is None
    if seeding:
        hub_dir = default_hub_dir()
        try:
            Path(hub_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HubError(f"cannot create the default hub {hub_dir}: {exc.strerror or exc}; set CBENCH_HOME "
                           "or use --hub DIR") from None
    else:
        hub_dir = check_hub_dir(hub_dir)
    server = HubServer(hub_dir, port=port, quiet=True)
    with server:
        seeder = _BackgroundSeeding(hub_dir) if seeding else None
        try:
            click.echo(f"serving {server.hub_dir} at {server.endpoint} (started in {server.startup_s:.2f} s); "
                       f"use it with --endpoint {server.endpoint} or HF_ENDPOINT={server.endpoint}; Ctrl-C stops it")
            if seeder is not None:
                seeder.start()
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                if seeder is not None and seeder.error is not None:
                    raise seeder.error from None  # seeding failed: one line, the server stopped
                click.echo("stopped", err=True)
        finally:
            if seeder is not None:  # the thread dies with the process; what it meets on the way is not a failure
                seeder.stopping = True


class _BackgroundSeeding:
    """Seeds the default hub from the zoo in a thread while the server answers (reads are live, so
    each repository is served as soon as it is published); a failure is kept in ``error`` and
    stops the server (SIGTERM to this process: :meth:`HubServer.serve_forever` ends)."""

    def __init__(self, hub_dir):
        self.hub_dir, self.error, self.stopping = hub_dir, None, False

    def start(self) -> None:
        import threading

        threading.Thread(target=self._run, name="cbench-hub-seed", daemon=True).start()

    def _run(self) -> None:
        import os
        import signal

        from cbench.hub.seeding import seed_default_hub

        try:
            seed_default_hub(self.hub_dir, progress=_SeedProgress(self.hub_dir))
        except Exception as exc:  # noqa: BLE001 - reported by the command as one line
            if self.stopping:  # the command is ending (Ctrl-C): the interpreter is tearing down
                return
            self.error = exc if isinstance(exc, CbenchError) else HubError(f"seeding {self.hub_dir} failed: {exc}")
            os.kill(os.getpid(), signal.SIGTERM)


class _SeedProgress:
    """``seeding HUB from the zoo: k/N repositories (ORG/NAME), T s, about E s left`` on stderr,
    at most every 2 s and at the end."""

    def __init__(self, hub_dir):
        import time

        self.hub_dir, self.t0, self.last, self.clock = hub_dir, time.perf_counter(), 0.0, time.perf_counter

    def __call__(self, k: int, n: int, ref) -> None:
        now = self.clock() - self.t0
        if k not in (1, n) and now - self.last < 2.0:
            return
        self.last = now
        left = "done" if k == n else f"about {now / k * (n - k):.0f} s left"
        click.echo(f"seeding {self.hub_dir} from the zoo: {k}/{n} repositories ({ref.repo_id}), {now:.1f} s, {left}",
                   err=True)


# ---------------------------------------------------------------------------- pull / info
def _note_offline(snap) -> None:
    reason = snap.extra.get("offline_reason")
    if reason and not reason.startswith("offline"):
        click.echo(f"note: {reason}; answering from the cache", err=True)
    if snap.extra.get("repaired"):
        click.echo(f"note: the cached snapshot was damaged ({snap.extra['repaired']}); downloaded it again",
                   err=True)


_accept_option = click.option("--accept-moved-tag", is_flag=True,
                              help="accept a version tag that now names another commit than the one recorded")


# a Hugging Face config's names for the shape TransformerLens's config names (first found wins)
_HF_SHAPE = {"n_layers": ("n_layer", "num_hidden_layers"), "n_heads": ("n_head", "num_attention_heads"),
             "d_model": ("n_embd", "hidden_size"), "d_mlp": ("n_inner", "intermediate_size"),
             "d_vocab": ("vocab_size",), "n_ctx": ("n_positions", "max_position_embeddings")}


def _checkpoint_shape(config: dict) -> dict:
    out = {"architecture": config["model_type"]}
    for key, names in _HF_SHAPE.items():
        value = next((config[n] for n in names if isinstance(config.get(n), int)), None)
        if value is not None:
            out[key] = value
    return out


def _snapshot_facts(snap) -> dict:
    meta = _read_json_file(snap.path / "meta.json") or {}
    config = _read_json_file(snap.path / "config.json") or {}
    circuit = _read_json_file(snap.path / "circuit.json") or {}
    if not meta and isinstance(config.get("model_type"), str):  # a plain Hugging Face checkpoint
        config = _checkpoint_shape(config)
        meta = {"model_kind": "pretrained"}
    facts = snap.to_dict()
    facts.update({
        "case": meta.get("case"), "model_kind": meta.get("model_kind"), "task_type": meta.get("task_type"),
        "description": meta.get("description"), "metrics": meta.get("metrics"),
        "dataset_revision": meta.get("dataset_revision"),
        "max_seq_len": meta.get("max_seq_len"), "input_tokens": meta.get("input_tokens"),
        "output_classes": meta.get("output_classes"),
        "model": {k: config.get(k) for k in ("architecture", "n_layers", "n_heads", "d_model", "d_head", "d_mlp",
                                             "d_vocab", "d_vocab_out", "n_ctx", "attn_only") if k in config} or None,
        "circuit_edges": len(circuit.get("edges", [])) if circuit else None,
        "circuit_nodes": len(circuit.get("nodes", [])) if circuit else None,
        "granularity": circuit.get("granularity") if circuit else None,
    })
    readme = snap.path / "README.md"
    facts["card_summary"] = _card_summary(readme.read_text(encoding="utf-8", errors="replace")) \
        if readme.is_file() else None
    return facts


@click.command()
@click.argument("spec")
@_type_option
@_endpoint_option
@_hub_option
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
@_accept_option
def pull(spec, repo_type, endpoint, hub_dir, as_json, accept_moved_tag):
    """Download SPEC (case-33, tracr-case-3, org/name, with @vX.Y.Z or @<sha>), verify it, cache it.

    Prints what it is and, on the last line, the local path of the snapshot.
    """
    from cbench.hub.pull import pull as do_pull

    snap = do_pull(spec, repo_type=repo_type, endpoint=endpoint, hub=hub_dir, accept_moved_tag=accept_moved_tag)
    _note_offline(snap)
    facts = _snapshot_facts(snap)
    if as_json:
        _echo_json(facts)
        return
    what = f"case {facts['case']}" if facts.get("case") else snap.repo_type
    bits = [f"{what} {snap.repo_id} {snap.tag or '(untagged)'}", f"sha {snap.sha}"]
    if facts.get("task_type"):
        bits.append(f"task {facts['task_type']}")
    bits.append(f"{snap.files} files, {_size(snap.size)}")
    bits.append("from cache" if snap.from_cache else "downloaded and verified")
    click.echo("; ".join(bits))
    click.echo(str(snap.path))


@click.command()
@click.argument("spec")
@_type_option
@_endpoint_option
@_hub_option
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
@_accept_option
def info(spec, repo_type, endpoint, hub_dir, as_json, accept_moved_tag):
    """The card summary and metadata of SPEC (pulled first if needed; from the cache offline)."""
    from cbench.hub.pull import pull as do_pull

    snap = do_pull(spec, repo_type=repo_type, endpoint=endpoint, hub=hub_dir, accept_moved_tag=accept_moved_tag)
    _note_offline(snap)
    facts = _snapshot_facts(snap)
    if as_json:
        _echo_json(facts)
        return
    lines = [f"{snap.repo_id} {snap.tag or '(untagged)'}  sha {snap.sha}"]
    if facts.get("case"):
        lines.append(f"case: {facts['case']}  kind: {facts.get('model_kind')}  task: {facts.get('task_type')}")
    if facts.get("description"):
        lines.append(f"description: {facts['description']}")
    m = facts.get("model")
    if m:
        vocab = f"d_vocab {m.get('d_vocab')}" + (f" -> {m['d_vocab_out']}" if m.get("d_vocab_out") else "")
        lines.append((f"model: {m['architecture']} checkpoint (no ground truth), " if m.get("architecture") else "model: ")
                     + f"{m.get('n_layers')} layers x {m.get('n_heads')} heads, d_model {m.get('d_model')}, "
                     f"{vocab}, n_ctx {m.get('n_ctx')}" + (", attention-only" if m.get("attn_only") else ""))
    if facts.get("circuit_edges") is not None:
        lines.append(f"circuit: {facts['circuit_edges']} edges, {facts['circuit_nodes']} nodes "
                     f"({facts.get('granularity')} granularity)")
    if facts.get("metrics"):
        lines.append("metrics: " + ", ".join(f"{k} {v}" for k, v in sorted(facts["metrics"].items())))
    if facts.get("card_summary"):
        lines.append(f"card: {facts['card_summary']}")
    lines.append(f"files: {snap.files}, {_size(snap.size)}")
    lines.append(f"path: {snap.path}")
    click.echo("\n".join(lines))


# ---------------------------------------------------------------------------- list
@click.command("list")
@click.option("--type", "repo_type", type=click.Choice(["model", "dataset"]), default=None,
              help="only models or only datasets (default: both)")
@_endpoint_option
@_hub_option
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
def list_cmd(repo_type, endpoint, hub_dir, as_json):
    """Models (cases) and datasets with their versions, task type and in-circuit edge count, in
    natural order (case-3 before case-11).

    Reads a hub directory's repositories directly and asks an --endpoint server (its model and
    dataset listing and each repository's tags; task and edges where that version is cached);
    offline, or with the server unreachable, lists what is cached.
    """
    from cbench.hub.pull import natural_key

    rows, why_cache = [], None
    for t in ([repo_type] if repo_type else ["model", "dataset"]):
        found, why = _list_rows(t, endpoint, hub_dir)
        why_cache = why_cache or why
        rows += [dict(r, type=t) for r in sorted(found, key=lambda r: natural_key(r["name"]))]
    if why_cache:
        click.echo(f"note: listing the cache ({why_cache}); pull a {repo_type or 'repository'} to add it", err=True)
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo(f"no {repo_type or 'model or dataset'}s found")
        return
    header = ("name", "type", "versions", "task", "circuit edges", "source")
    table = [header] + [(r["name"], r["type"], ", ".join(r["versions"]), r.get("task_type") or "-",
                         "-" if r.get("circuit_edges") is None else str(r["circuit_edges"]), r["source"])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _list_rows(repo_type: str, endpoint, hub_dir) -> tuple[list[dict], str | None]:
    """The rows of one repository type, and why they come from the cache (None: from the hub)."""
    from cbench.errors import HubUnreachableError
    from cbench.hub.cache import Cache
    from cbench.hub.pull import short_name
    from cbench.hub.remote import hf_offline, select_remote

    rows: list[dict] = []
    if hf_offline() and (endpoint is not None or hub_dir is not None):
        select_remote(endpoint, hub_dir)  # offline lists the cache, but a bad --hub/--endpoint is still an error
    remote = None if hf_offline() else select_remote(endpoint, hub_dir)
    why = "offline" if remote is None else None
    if remote is not None and remote.endpoint is not None:
        try:
            return _endpoint_rows(repo_type, remote), None
        except HubUnreachableError as exc:
            why = str(exc)
    if remote is not None and remote.hub_dir is not None:
        hub = remote.hub
        if remote.default:  # the default hub is seeded lazily: what it lacks is read from the zoo
            rows += _zoo_rows(repo_type, hub)
        if hub.exists():
            for repo_id in hub.repos(repo_type):
                versions = hub.versions(repo_id, repo_type)
                row = {"name": short_name(repo_id), "repo": repo_id, "versions": versions,
                       "newest": versions[-1] if versions else None, "source": "hub"}
                if versions:
                    row.update(_doc_facts(functools.partial(hub.read_file, repo_id, versions[-1], repo_type=repo_type)))
                rows.append(row)
        if hub.exists() or rows:
            return rows, None
        why = f"{hub.root} does not exist yet"
    cache = Cache()
    for ref in cache.cached_repos(repo_type):
        versions = cache.cached_versions(ref)
        snap = cache.resolve_offline(ref, None)
        row = {"name": short_name(ref.repo_id), "repo": ref.repo_id, "versions": versions,
               "newest": versions[-1] if versions else None, "source": "cache"}
        if snap is not None:
            row.update(_doc_facts(_dir_reader(snap.path)))
        rows.append(row)
    return rows, why


def _endpoint_rows(repo_type: str, remote) -> list[dict]:
    """Rows for the repositories an endpoint lists; task and circuit edges from the cache when the
    newest version is cached (the server is not asked for files)."""
    from cbench.hub.cache import Cache
    from cbench.hub.pull import short_name
    from cbench.hub.repos import RepoRef, sort_versions

    cache = Cache()
    rows = []
    for repo_id, tags in remote.repositories(repo_type).items():
        versions = sort_versions(tags)
        row = {"name": short_name(repo_id), "repo": repo_id, "versions": versions,
               "newest": versions[-1] if versions else None, "source": "hub"}
        snap = cache.snapshot(RepoRef(repo_id, repo_type), tags[versions[-1]]) if versions else None
        row.update(_doc_facts(_dir_reader(snap.path if snap is not None else None)))
        rows.append(row)
    return rows


def _zoo_rows(repo_type: str, hub) -> list[dict]:
    """Rows for the zoo's releases that the (lazily seeded) default hub does not hold yet."""
    from cbench.hub.pull import short_name
    from cbench.hub.repos import sort_versions
    from cbench.hub.zoo import zoo_releases

    seeded = set(hub.repos(repo_type)) if hub.exists() else set()
    rows = []
    for ref, versions in zoo_releases().items():
        if ref.repo_type != repo_type or ref.repo_id in seeded:
            continue
        vs = sort_versions(versions)
        newest = versions[vs[-1]]
        row = {"name": short_name(ref.repo_id), "repo": ref.repo_id, "versions": vs, "newest": vs[-1],
               "source": "hub"}
        row.update(_doc_facts(_dir_reader(newest)))
        rows.append(row)
    return rows


def _dir_reader(path: Path | None):
    """``read(name)``: the bytes of ``path/name``, or None (no such file, or no ``path``)."""
    def read(name: str) -> bytes | None:
        return (path / name).read_bytes() if path is not None and (path / name).is_file() else None

    return read


def _doc_facts(read) -> dict:
    out = {"task_type": None, "circuit_edges": None}
    for name, key in (("meta.json", "task_type"), ("circuit.json", "circuit_edges")):
        data = read(name)
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            out[key] = doc.get("task_type") if key == "task_type" else len(doc.get("edges") or [])
    return out


# ---------------------------------------------------------------------------- import-interpbench
@click.command("import-interpbench")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--case", "case_id", required=True, help="the case id, e.g. 3 or 33")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, callback=check_out_dir,
              help="where to write the cbench artifact (default: ./case-<ID>-interpbench)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
def import_interpbench(directory, case_id, out_dir, as_json):
    """Convert an original InterpBench case folder (ll_model.pth, ll_model_cfg.pkl, meta.json,
    edges.pkl) into a validated cbench artifact. Pickles are read through a restricted unpickler."""
    from cbench.artifacts.interpbench_import import import_interpbench as do_import

    if out_dir is None:
        out_dir = Path(f"case-{case_id}-interpbench")
    art = do_import(directory, case_id, out_dir)
    n_edges = len((art.circuit or {}).get("edges", []))
    if as_json:
        _echo_json({"case": str(case_id), "path": str(art.path), "circuit_edges": n_edges, "validated": True})
        return
    click.echo(f"imported InterpBench case {case_id} -> {art.path} ({n_edges} circuit edges; validated)")


__all__ = ["hub", "import_interpbench", "info", "list_cmd", "publish", "pull"]
