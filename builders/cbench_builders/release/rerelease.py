"""``cbench build re-release``: bring every released model to today's artifact form as a new
version, without touching its weights.

For each model repository in ``model_zoo/releases/models/<org>/`` it takes the newest version
``vX.Y.Z`` and, if anything is missing from today's form, writes ``vX.(Y+1).0`` beside it (or
``vX.Y.(Z+1)`` when only the cards change) with:

* ``config.json``: ``default_prepend_bos: true`` when ``meta.json`` names a ``bos_token`` (every
  cbench model reads BOS at position 0; earlier releases said ``false`` and relied on cbench's loader
  switching it on, so TransformerLens built from the file stripped BOS and gave wrong outputs);
* ``tokenizer.json`` / ``tokenizer_config.json`` where absent (:mod:`cbench.artifacts.tokenizer`);
* ``bridge/config.json`` and ``bridge/model.safetensors``: the model for TransformerLens 4's
  ``TransformerBridge.boot_native`` (:mod:`cbench.artifacts.native_bridge`);
* the card (``README.md``): a "Load without cbench" section whose TransformerLens 4.x block runs
  on its own and whose example input is a real input without unknown tokens, a ``model-index``
  listing each metric once (:func:`cbench_builders.release.cards.refresh_card`), and a "Changes in
  vX.Y.Z" note;
* ``meta.json``: its sha256 manifest recomputed, nothing else.

The same applies to sub-artifacts (``tracr/``). ``model.safetensors`` is copied byte for byte
(checked); older versions stay in the zoo, so they remain pullable at their tags. A model already in
today's form is skipped, so running the command again changes nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import click
from cbench.errors import BuildError

ORG = "cbench"
LOADING_HEADING = "## Load without cbench"


@dataclass
class Upgrade:
    """What a re-release changed in one artifact directory (``where``: '' for the root)."""

    where: str
    changes: list[str] = field(default_factory=list)  #: changes to the artifact's files (a minor version)
    bridge_problem: str | None = None
    card_changes: list[str] = field(default_factory=list)  #: changes to its card alone (a patch version)


def next_minor(version: str) -> str:
    from cbench.hub.repos import parse_version

    major, minor, _patch = parse_version(version)
    return f"v{major}.{minor + 1}.0"


def next_patch(version: str) -> str:
    from cbench.hub.repos import parse_version

    major, minor, patch = parse_version(version)
    return f"v{major}.{minor}.{patch + 1}"


def example_prompt(zoo: Path, meta: dict) -> str | None:
    """A real input for the card's example, when the model reads a dataset of whole sentences
    (IOI: the first validation prompt of the dataset revision it was trained on); None otherwise."""
    ref = meta.get("dataset") if isinstance(meta.get("dataset"), dict) else None
    if not ref or not ref.get("repo") or str(meta.get("case")) != "ioi":
        return None
    import pyarrow.parquet as pq

    files = sorted((zoo / "releases" / "datasets" / ref["repo"] / str(ref.get("revision"))).glob(
        "data/validation-*.parquet"))
    if not files:
        return None
    rows = pq.read_table(files[0], columns=["prompt"]).slice(0, 1).to_pylist()
    return rows[0]["prompt"] if rows else None


def refresh_card_file(art: Path, repo: str, prompt: str | None, bridge_problem: str | None = None) -> list[str]:
    """Bring the artifact's card to today's form in place (:func:`cards.refresh_card`); what changed."""
    from cbench_builders.release.cards import refresh_card

    path = art / "README.md"
    if not path.is_file():
        return []
    text, changes = refresh_card(path.read_text(encoding="utf-8"), _read(art / "meta.json"), repo, prompt,
                                 bridge_problem)
    if changes:
        path.write_text(text, encoding="utf-8")
    return changes


def _artifact_dirs(root: Path) -> list[Path]:
    """Artifact directories under ``root`` (those with a meta.json), deepest first, root last."""
    dirs = [p.parent for p in root.rglob("meta.json") if not any(s.startswith(".") for s in p.relative_to(root).parts)]
    return sorted(dirs, key=lambda p: (-len(p.relative_to(root).parts), str(p)))


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def upgrade_dir(art: Path) -> Upgrade:
    """Bring one artifact directory (its sub-artifacts already done) to today's form in place."""
    from cbench.artifacts.model import read_model_artifact
    from cbench.artifacts.native_bridge import (
        BRIDGE_CONFIG_FILE,
        bridge_files,
        to_native,
    )
    from cbench.artifacts.serialization import dumps_json
    from cbench.artifacts.tokenizer import (
        TOKENIZER_CONFIG_FILE,
        TOKENIZER_FILE,
        tokenizer_config,
        write_tokenizer,
    )
    from cbench.errors import ArtifactError

    up = Upgrade(where=art.name)
    meta, config = _read(art / "meta.json"), _read(art / "config.json")
    if meta.get("bos_token") is not None and config.get("default_prepend_bos") is not True:
        config["default_prepend_bos"] = True
        (art / "config.json").write_bytes(dumps_json(config))
        up.changes.append("`config.json` says `default_prepend_bos: true` (it said `false`: inputs start with "
                          f"`{meta['bos_token']}`, and TransformerLens built from the file with the tokenizer's BOS "
                          "declared stripped it and gave wrong outputs; cbench's own loader was not affected)")
    if config.get("dtype") == "float32":
        del config["dtype"]
        (art / "config.json").write_bytes(dumps_json(config))
        up.changes.append("`config.json` leaves out `dtype` (float32, TransformerLens's default): its string value "
                          "made `HookedTransformerConfig(**config)` fail")
    if not (art / TOKENIZER_FILE).is_file():
        write_tokenizer(art, meta)
        up.changes.append("`tokenizer.json` and `tokenizer_config.json` (a word-level tokenizer that prepends BOS)")
    elif not (art / TOKENIZER_CONFIG_FILE).is_file():
        (art / TOKENIZER_CONFIG_FILE).write_text(json.dumps(tokenizer_config(meta), indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")
        up.changes.append("`tokenizer_config.json`, so `transformers.AutoTokenizer` loads `tokenizer.json`")
    state = read_model_artifact(art, verify=False).state_dict()
    try:
        to_native(config, state)
    except ArtifactError as exc:
        up.bridge_problem = str(exc)
    if not (art / BRIDGE_CONFIG_FILE).is_file() and up.bridge_problem is None:
        for rel, data in bridge_files(config, state).items():
            (art / rel).parent.mkdir(parents=True, exist_ok=True)
            (art / rel).write_bytes(data)
        up.changes.append("`bridge/`: the model for TransformerLens 4 (`TransformerBridge.boot_native`)")
    return up


def update_card(art: Path, up: Upgrade, version: str, previous: str, repo: str) -> None:
    """Insert the loading section (when the card has none) and the change note before
    ``## Limitations`` (or ``## Citation``, or at the end)."""
    from cbench_builders.release.cards import loading_section

    path = art / "README.md"
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    blocks = []
    if LOADING_HEADING not in text:
        blocks.append(loading_section(_read(art / "meta.json"), repo, up.bridge_problem))
    note = [f"## Changes in {version}", "",
            f"Re-released from {previous} with the same weights (`model.safetensors` byte for byte):", ""]
    note += [f"- {c}" for c in up.changes + up.card_changes]
    if up.bridge_problem:
        note.append(f"- no TransformerLens 4 form: {up.bridge_problem}")
    blocks.append("\n".join(note))
    insert = "\n\n".join(blocks) + "\n\n"
    for anchor in ("\n## Limitations", "\n## Citation"):
        i = text.find(anchor)
        if i >= 0:
            text = text[:i + 1] + insert + text[i + 1:]
            break
    else:
        text = text.rstrip("\n") + "\n\n" + insert.rstrip("\n") + "\n"
    path.write_text(text, encoding="utf-8")


def _refresh_manifest(art: Path) -> None:
    from cbench.artifacts.serialization import artifact_files, dumps_json, sha256_file

    meta = _read(art / "meta.json")
    meta["files"] = {rel: sha256_file(art / rel) for rel in artifact_files(art) if rel != "meta.json"}
    (art / "meta.json").write_bytes(dumps_json(meta))


def rerelease_one(src: Path, parent: Path, zoo: Path | None = None) -> tuple[str, list[Upgrade]] | None:
    """Write the next version of ``src`` under ``parent`` in today's form: the next minor version
    when an artifact file changed, the next patch version when only cards did. Returns (version,
    upgrades), or None (and nothing written) when ``src`` is already in today's form."""
    from cbench.artifacts.model import verify_artifact
    from cbench.artifacts.serialization import sha256_file

    previous = src.name
    repo = f"{ORG}/{parent.name}"
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{previous}.tmp-", dir=parent))
    try:
        shutil.rmtree(tmp)
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        ups = []
        for art in _artifact_dirs(tmp):
            up = upgrade_dir(art)
            up.where = art.relative_to(tmp).as_posix() if art != tmp else ""
            prompt = example_prompt(zoo, _read(art / "meta.json")) if zoo is not None else None
            up.card_changes = refresh_card_file(art, repo, prompt, up.bridge_problem)
            ups.append(up)
        if not any(u.changes or u.card_changes for u in ups):
            return None
        version = next_minor(previous) if any(u.changes for u in ups) else next_patch(previous)
        for art, up in zip(_artifact_dirs(tmp), ups):
            if up.changes or up.card_changes:
                update_card(art, up, version, previous, repo=repo)
            _refresh_manifest(art)
        for w in tmp.rglob("model.safetensors"):
            rel = w.relative_to(tmp)
            if "bridge" not in rel.parts and sha256_file(w) != sha256_file(src / rel):
                raise BuildError(f"{parent / version}: {rel} changed while re-releasing; refusing")
        verify_artifact(tmp)
        dst = parent / version
        if dst.exists():
            raise BuildError(f"{dst} already exists; release a new version")
        tmp.rename(dst)
        return version, ups
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def check_version(value: str | None, option: str) -> str | None:
    """``value`` if it is None or a version tag vMAJOR.MINOR.PATCH; UsageError otherwise."""
    from cbench.errors import UsageError
    from cbench.hub.repos import is_version

    if value is not None and not is_version(value):
        raise UsageError(f"{option} {value!r} is not a version (vMAJOR.MINOR.PATCH, e.g. v1.2.0)")
    return value


def rerelease(zoo: Path, only: set[str] | None = None, echo=lambda s: None) -> list[str]:
    """Re-release every model of the zoo that is not in today's form; returns ``org/name@version``."""
    from cbench.hub.repos import sort_versions

    from cbench_builders.release.zoo import _record_release_date

    base = zoo / "releases" / "models" / ORG
    names = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    if only:
        unknown = sorted(only - set(names))
        if unknown:
            raise BuildError(f"not released models: {', '.join(unknown)}")
        names = [n for n in names if n in only]
    done = []
    for k, name in enumerate(names, 1):
        versions = [p.name for p in (base / name).iterdir() if p.is_dir() and not p.name.startswith(".")]
        newest = sort_versions(versions)[-1]
        made = rerelease_one(base / name / newest, base / name, zoo)
        if made is None:
            echo(f"[{k}/{len(names)}] {ORG}/{name}@{newest}: already current")
            continue
        target, _ups = made
        _record_release_date(zoo, f"models/{ORG}/{name}/{target}")
        done.append(f"{ORG}/{name}@{target}")
        echo(f"[{k}/{len(names)}] released {ORG}/{name}@{target} (from {newest})")
    return done


@click.command("re-release")
@click.option("--only", default=None, help="comma-separated model names (default: every released model)")
@click.option("--zoo", default=None, type=click.Path(path_type=Path), help="model_zoo directory (default: the repo's)")
@click.option("--index-version", default=None, callback=lambda ctx, param, v: check_version(v, "--index-version"),
              help="the benchmark index's version after the re-release, vMAJOR.MINOR.PATCH (default: its minor "
                   "version + 1)")
def rerelease_cmd(only, zoo, index_version):
    """Re-release every model not in today's artifact form as its next minor version (same weights)."""
    from cbench.errors import UsageError
    from cbench.hub.zoo import zoo_dir

    from cbench_builders.release.zoo import write_index

    zoo = zoo or zoo_dir()
    if zoo is None or not Path(zoo).is_dir():
        raise UsageError(f"--zoo {zoo}: no such directory")
    only_set = {s.strip() for s in only.split(",") if s.strip()} if only else None
    done = rerelease(Path(zoo), only_set, echo=click.echo)
    if not done:
        click.echo("every model is in today's form; nothing released")
        return
    index_path = Path(zoo) / "releases" / "index.json"
    current = json.loads(index_path.read_text()).get("version") if index_path.is_file() else "v0.0.0"
    out = write_index(Path(zoo), index_version or next_minor(current))
    click.echo(f"index: {out}")
