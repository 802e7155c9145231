"""``cbench cache``: look after the local cache (``$CBENCH_HOME/cache``)."""

from __future__ import annotations

import json

import click


@click.group()
def cache():
    """Check the local cache of pulled models and datasets."""


@cache.command()
@click.option("--repair", is_flag=True, help="remove damaged snapshots so the next pull downloads them again")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
def verify(repair, as_json):
    """Check every cached snapshot (models and datasets): each file against its blob id, the hub's
    listing, the sha256 recorded when it was verified, and meta.json's manifest. Exit 1 if any is
    damaged."""
    from cbench.hub.cache import Cache
    from cbench.hub.cache_verify import discard, verify_all

    c = Cache()
    reports = verify_all(c)
    bad = [r for r in reports if not r.ok]
    problem = c.index_problem()
    index_damaged = problem is not None and problem != "missing"
    if repair:
        for r in bad:
            with c.repo_lock(r.ref):
                discard(c, r)
        if index_damaged:
            c.set_aside_damaged_index()
    if as_json:
        click.echo(json.dumps([{"repo": r.ref.repo_id, "type": r.ref.repo_type, "sha": r.sha, "ok": r.ok,
                                "config": r.config, "files": r.files, "problems": r.problems} for r in reports], indent=1))
    else:
        for r in reports:
            label = (f"{r.ref.repo_id}{' (dataset)' if r.ref.repo_type == 'dataset' else ''}@{r.sha[:12]}"
                     + (f" config {r.config}" if r.config else ""))
            click.echo(f"{label}: {'OK' if r.ok else 'DAMAGED'} ({r.files} files)"
                       + ("" if r.ok else f": {r.summary()}"))
        if index_damaged:
            click.echo(f"the cache's index {c.index_path} is {problem}"
                       + ("; set aside (a new one is written by the next pull)" if repair
                          else "; run `cbench cache verify --repair`, then pull again what you need"))
        if not reports:
            click.echo(f"the cache {c.root} holds no snapshots")
        else:
            click.echo(f"{len(reports)} snapshot(s): {len(reports) - len(bad)} intact, {len(bad)} damaged"
                       + (" (removed; pull them again)" if repair and bad else
                          ("; `cbench pull NAME@SHA` downloads a damaged one again, or run "
                           "`cbench cache verify --repair`" if bad else "")))
    if bad or (index_damaged and not repair):
        raise SystemExit(1)


__all__ = ["cache"]
