"""``cbench build release``: put built artifacts into ``model_zoo/releases`` and index them.

A release copies each built directory (Tracr models, SIIT and IIT models, datasets) to
``model_zoo/releases/{models,datasets}/cbench/<name>/<vX.Y.Z>/``, from which every default hub is
seeded (so a fresh clone can ``cbench pull case-3`` without building anything), then writes
``model_zoo/releases/index.json``: a ``benchmark-index`` document listing every case and
dataset with its versions, the commit sha each version gets when published (commits are
deterministic, so the sha is the same in every seeded hub) and the sha256 of every file.

A version already in the zoo is never overwritten; publishing the same content again is a no-op.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import click

import cbench
from cbench.errors import BuildError

ORG = "cbench"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tree_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): _sha256(p)
            for p in sorted(root.rglob("*")) if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def collect(built: dict[str, Path]) -> list[tuple[str, str, Path]]:
    """(repo type, repo name, directory) for every built artifact under the given build dirs."""
    from cbench.hub.publishing import is_checkpoint_repository

    found: list[tuple[str, str, Path]] = []
    for kind, root in built.items():
        if root is None or not root.is_dir():
            continue
        for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if (d / "meta.json").is_file() or is_checkpoint_repository(d):  # a cbench model, or a plain checkpoint
                found.append(("model", d.name, d))
            elif (d / "README.md").is_file():  # a dataset (e.g. tracr-programs beside the Tracr models)
                found.append(("dataset", d.name, d))
    return found


def release(built: dict[str, Path], version: str, zoo: Path, only: set[str] | None = None) -> list[str]:
    """Copy built artifacts into ``zoo/releases`` at ``version``; returns the repos released."""
    from cbench.hub.repos import parse_version
    from cbench.hub.publishing import release_problems

    parse_version(version)
    released = []
    for repo_type, name, src in collect(built):
        if only and name not in only:
            continue
        problems = release_problems(src, repo_type)
        if problems:
            raise BuildError(f"{name}: not releasable: " + "; ".join(problems[:5]))
        dst = zoo / "releases" / f"{repo_type}s" / ORG / name / version
        if dst.exists():
            if _tree_files(dst) == _tree_files(src):
                continue
            raise BuildError(f"{ORG}/{name} {version} is already released with other content; release a new version")
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dst.parent.parent if dst.parent.exists() else None))
        try:
            shutil.rmtree(tmp)
            shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".*", "__pycache__"))
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp.rename(dst)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        released.append(f"{ORG}/{name}@{version}")
        _record_release_date(zoo, f"{repo_type}s/{ORG}/{name}/{version}")
    return released


def _record_release_date(zoo: Path, key: str) -> None:
    """Record when a release entered the zoo (``releases/release-dates.json``): every hub seeded
    from the zoo publishes it with this date, so its commit sha is the same everywhere and its
    date is the real one (see :func:`cbench.hub.zoo.release_dates`)."""
    from cbench.artifacts.serialization import write_json
    from cbench.hub.zoo import RELEASE_DATES_FILE

    path = zoo / "releases" / RELEASE_DATES_FILE
    try:
        dates = json.loads(path.read_text())
    except (OSError, ValueError):
        dates = {}
    if key not in dates:
        dates[key] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        write_json(path, dict(sorted(dates.items())))


def write_index(zoo: Path, version: str) -> Path:
    """Seed a scratch hub from the zoo and write ``releases/index.json`` with the real commit shas.

    The index's benchmark version never goes back: releasing an older version of one repository
    (a new model at v1.0.0, say) keeps the index at the newest version it had."""
    from cbench.artifacts.serialization import write_json
    from cbench.hub.repos import Hub, parse_version
    from cbench.hub.seeding import ensure_seeded
    from cbench.hub.zoo import zoo_releases

    index_path = zoo / "releases" / "index.json"
    if index_path.is_file():
        previous = json.loads(index_path.read_text()).get("version")
        if previous and parse_version(previous) > parse_version(version):
            version = previous

    with tempfile.TemporaryDirectory(prefix="cbench-index-") as tmp:
        hub_dir = Path(tmp) / "hub"
        ensure_seeded(hub_dir, zoo=zoo)
        hub = Hub(hub_dir)
        cases, datasets, checkpoints = [], [], []
        for ref, versions in sorted(zoo_releases(zoo).items(), key=lambda kv: (kv[0].repo_type, kv[0].repo_id)):
            tags = hub.refs(ref.repo_id, ref.repo_type)
            entries = []
            for v, path in sorted(versions.items(), key=lambda kv: tuple(int(x) for x in kv[0][1:].split("."))):
                entries.append({"version": v, "revision": tags[v], "files": _tree_files(path)})
            name = ref.repo_id.split("/", 1)[1]
            if ref.repo_type == "dataset":
                configs = _dataset_configs(versions[max(versions, key=lambda s: tuple(int(x) for x in s[1:].split(".")))])
                datasets.append({"repo": ref.repo_id, "configs": configs, "versions": entries})
                continue
            first = versions[next(iter(versions))]
            if not (first / "meta.json").is_file():  # a plain checkpoint (the language model): no case
                cfg = json.loads((first / "config.json").read_text())
                checkpoints.append({"repo": ref.repo_id, "name": name, "model_type": cfg.get("model_type"),
                                    "versions": entries})
                continue
            meta = json.loads((first / "meta.json").read_text())
            circuit_path = versions[next(iter(versions))] / "circuit.json"
            n_edges = len(json.loads(circuit_path.read_text())["edges"]) if circuit_path.is_file() else None
            cases.append({"case": str(meta["case"]), "repo": ref.repo_id, "name": name,
                          "description": meta.get("description", ""), "task_type": meta["task_type"],
                          "model_kind": meta["model_kind"], "circuit_edges": n_edges, "versions": entries})
    index = {
        "schema": "cbench/benchmark-index/v1", "name": "cbench", "version": version,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "cbench_version": cbench.__version__, "cases": _one_entry_per_case(cases), "datasets": datasets,
        **({"checkpoints": checkpoints} if checkpoints else {}),
    }
    out = zoo / "releases" / "index.json"
    write_json(out, index)
    return out


_KIND_ORDER = {"siit": 0, "tracr": 1, "iit": 2, "stress": 3, "variables": 4}


def _one_entry_per_case(models: list[dict]) -> list[dict]:
    """One index entry per case: its primary model (the SIIT model when one is released, else the
    Tracr model) at the top level, and every model of the case (kinds siit, tracr, iit) under
    ``models``."""
    by_case: dict[str, list[dict]] = {}
    for m in models:
        by_case.setdefault(m["case"], []).append(m)
    out = []
    for case in sorted(by_case, key=lambda c: (len(c), c)):
        ms = sorted(by_case[case], key=lambda m: _KIND_ORDER.get(m["model_kind"], 9))
        entry = dict(ms[0])
        entry["models"] = [{k: m[k] for k in ("repo", "name", "model_kind", "circuit_edges", "versions")} for m in ms]
        out.append(entry)
    return out


def _dataset_configs(path: Path) -> list[str]:
    readme = path / "README.md"
    if not readme.is_file():
        return []
    configs = []
    for line in readme.read_text().splitlines():
        line = line.strip()
        if line.startswith("- config_name:"):
            configs.append(line.split(":", 1)[1].strip())
    return sorted(dict.fromkeys(configs))


@click.command("release")
@click.option("--version", "version", required=True, help="semver tag, e.g. v1.0.0")
@click.option("--tracr-dir", default="build/tracr", type=click.Path(path_type=Path), show_default=True)
@click.option("--siit-dir", default="build/siit", type=click.Path(path_type=Path), show_default=True)
@click.option("--datasets-dir", default="build/datasets", type=click.Path(path_type=Path), show_default=True)
@click.option("--ioi-dir", default="build/ioi-model", type=click.Path(path_type=Path), show_default=True,
              help="where `cbench build ioi-model` wrote the IOI model (ioi/)")
@click.option("--stress-dir", default="build/stress", type=click.Path(path_type=Path), show_default=True,
              help="where `cbench build stress` wrote the stress tier's models")
@click.option("--variables-dir", default="build/variables", type=click.Path(path_type=Path), show_default=True,
              help="where `cbench build variables` wrote the variables tier's models")
@click.option("--lm-dir", default="build/lm-release", type=click.Path(path_type=Path), show_default=True,
              help="where `cbench build lm` wrote the language model's repository")
@click.option("--only", default=None, help="comma-separated repo names to release (default: everything built)")
@click.option("--zoo", default=None, type=click.Path(path_type=Path), help="model_zoo directory (default: the repo's)")
def build_release_cmd(version, tracr_dir, siit_dir, datasets_dir, only, zoo, ioi_dir, stress_dir, variables_dir, lm_dir):
    """Copy built artifacts into model_zoo/releases at VERSION and rewrite the benchmark index."""
    from cbench.hub.zoo import zoo_dir

    from cbench.errors import UsageError
    from cbench.hub.repos import parse_version

    parse_version(version)  # a bad version is a usage error before anything is read
    zoo = zoo or zoo_dir()
    if zoo is None:
        raise BuildError("cannot find model_zoo/; pass --zoo")
    if not Path(zoo).is_dir():
        raise UsageError(f"--zoo {zoo}: no such directory")
    built = {"tracr": tracr_dir, "siit": siit_dir, "datasets": datasets_dir, "ioi": ioi_dir, "stress": stress_dir,
             "variables": variables_dir, "lm": lm_dir}
    if not any(Path(d).is_dir() for d in built.values()):
        raise UsageError(f"none of {', '.join(str(d) for d in built.values())} exists; build something first "
                         "(cbench build tracr / datasets / siit / ioi-model / stress / variables / lm) or pass "
                         "--tracr-dir/--siit-dir/--datasets-dir/--ioi-dir/--stress-dir/--variables-dir/--lm-dir")
    only_set = {s.strip() for s in only.split(",") if s.strip()} if only is not None else None
    if only is not None:
        names = {name for _t, name, _p in collect(built)}
        unknown = sorted((only_set or {""}) - names)
        if unknown:
            raise UsageError(f"--only {', '.join(unknown) or repr(only)}: not among the built artifacts "
                             f"({', '.join(sorted(names)[:12]) or 'none'}{', ...' if len(names) > 12 else ''})")
    done = release(built, version, zoo, only_set)
    for r in done:
        click.echo(f"released {r}")
    if not done:
        index_path = zoo / "releases" / "index.json"
        current = None
        if index_path.is_file():
            try:
                current = json.loads(index_path.read_text()).get("version")
            except (OSError, ValueError, AttributeError):
                current = None
        if current != version:
            raise UsageError(f"nothing new to release at {version}: every built artifact is already released; "
                             f"the index was left at {current or 'its version'}")
        click.echo(f"nothing new to release; the index stays at {version}")
        return
    out = write_index(zoo, version)
    click.echo(f"index: {out}")
