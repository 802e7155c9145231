"""``cbench build schemas``: the JSON Schemas as a hub repository (``cbench/schemas``).

The repository holds the schema files exactly as the client ships them, each schema bundled
into one self-contained document (:func:`cbench.schemas.bundled_schema`), the shipped examples,
and a card with the two-line recipe for plain ``jsonschema`` and the rules only ``cbench
validate`` checks (:data:`ONLY_CBENCH_VALIDATE`). ``cbench build release --only schemas`` puts
it into the zoo like any dataset.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

import cbench
from cbench.cli.options import check_out_tree
from cbench.errors import UsageError
from cbench_builders.release.rerelease import check_version

REPO = "cbench/schemas"

#: the rules ``cbench validate`` checks that JSON Schema cannot state (docs/formats.md lists them too),
#: each with the shipped example that shows it
ONLY_CBENCH_VALIDATE = {
    "NaN and Infinity are refused (they are not JSON, RFC 8259; Python's `json` reads them and a plain "
    "validator takes them for numbers)": "edge-scores/invalid-score-nan.json",
    "an object with the same key twice is refused (a JSON parser silently keeps one of them)": None,
    "`min_seq_len` at most `max_seq_len` (a comparison of two fields)": "case/invalid-min-above-max-seq-len.json",
    "a circuit's `edge_signal` marks only edges of its own `edges` list": "circuit/invalid-edge-signal-not-an-edge-of-the-circuit.json",
    "each `fraction` of circuits-at-sizes at most once": "circuits-at-sizes/invalid-fraction-twice.json",
    "each case of the benchmark index, and each version of a case, listed once":
        "benchmark-index/invalid-case-listed-twice.json",
    "a FIND entry's interval has its lower bound at most its upper bound": "find-submission/invalid-interval-reversed.json",
    "FIND string functions (ids `s...`) carry no interval": "find-submission/invalid-interval-on-string-function.json",
    "model-meta's `bos_token` and `pad_token` are among its `input_tokens`": None,
}


def write_schemas_repo(out: Path, version: str) -> Path:
    """Write the ``schemas`` dataset repository under ``out`` (``out/schemas``); returns it."""
    from cbench.schemas import SCHEMA_KINDS, bundled_schema
    from cbench.schemas.registry import DEFS_FILE, _schema_dir
    from cbench_builders.release.cards import render_card

    src = Path(str(_schema_dir()))
    dst = Path(out) / "schemas"
    if dst.exists():
        shutil.rmtree(dst)
    (dst / "bundled").mkdir(parents=True)
    for kind in SCHEMA_KINDS:
        shutil.copyfile(src / f"{kind}.schema.json", dst / f"{kind}.schema.json")
        (dst / "bundled" / f"{kind}.schema.json").write_text(json.dumps(bundled_schema(kind), indent=2) + "\n")
    shutil.copyfile(src / DEFS_FILE, dst / DEFS_FILE)
    n_examples = write_examples(src / "examples", dst / "data" / "examples.jsonl")
    card = render_card("dataset_schemas", {"repo": REPO, "version": version, "kinds": SCHEMA_KINDS,
                                           "n_examples": n_examples, "cbench_version": cbench.__version__,
                                           "rules": list(ONLY_CBENCH_VALIDATE)})
    (dst / "README.md").write_text(card)
    return dst


def write_examples(src: Path, path: Path) -> int:
    """The shipped examples as one JSON Lines file (the ``examples`` config): one row per example,
    ``kind``, ``name``, ``valid`` and the document's exact text (a string: invalid examples are not
    all JSON, and the repository's own files must all be valid documents). Returns the count."""
    rows = []
    for f in sorted(src.rglob("*.json")):
        kind = f.relative_to(src).parts[0]
        rows.append({"kind": kind, "name": f.stem, "valid": f.name.startswith("valid"),
                     "document": f.read_text(encoding="utf-8")})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


@click.command("schemas")
@click.option("--out", default="build/datasets", type=click.Path(path_type=Path), show_default=True,
              callback=check_out_tree, help="where to write the repository (as OUT/schemas)")
@click.option("--version", "version", default="v1.0.0", show_default=True,
              callback=lambda ctx, param, v: check_version(v, "--version"),
              help="the version the card's recipe names (the tag `cbench build release` gives it)")
def build_schemas_cmd(out: Path, version: str):
    """Write the JSON Schemas as the hub repository cbench/schemas (schemas, bundled schemas, examples, card)."""
    from cbench.hub.repos import parse_version

    parse_version(version)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    path = write_schemas_repo(out, version)
    click.echo(f"wrote {path} ({sum(1 for p in path.rglob('*') if p.is_file())} files)")
