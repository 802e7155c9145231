"""``cbench build datasets``: the counterfactual, circuits and IOI datasets with their cards.

Output layout (one directory per dataset repository, ready for ``cbench publish``)::

    <out>/counterfactuals/README.md, case-<id>/{train,validation,test}-00000-of-00001.parquet
    <out>/circuits/README.md, case-<id>/train-00000-of-00001.parquet
    <out>/ioi/README.md, ioi_vocab.json, data/{train,validation,test}-00000-of-00001.parquet

Building a case again replaces its files; configs of other cases already in the directory stay,
and the card is re-rendered from every config present (their parquet metadata), so building
case 3 and then case 33 into one directory gives a card with both configs.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import click

import cbench
from cbench.cli.options import MAX_COUNT, SEED_TYPE, check_out_tree, counts
from cbench.errors import BuildError, CbenchError, UsageError, did_you_mean
from cbench_builders.datasets import circuits as circuits_dataset, counterfactuals
from cbench_builders.datasets.high_level import TIE_GAP
from cbench_builders.ioi import dataset as ioi, vocab as ioi_vocab
from cbench_builders.release.cards import render_card, size_category
from cbench_builders.release.parquet import read_metadata

DATASETS = ("counterfactuals", "circuits", "ioi")
ORG = getattr(cbench, "DEFAULT_ORG", "cbench")


def _repo(name: str) -> str:
    return f"{ORG}/{name}"


# --------------------------------------------------------------------------- option parsing
def parse_datasets(text: str) -> tuple[str, ...]:
    out = []
    for part in str(text).split(","):
        name = part.strip()
        if not name:
            continue
        if name not in DATASETS:
            raise UsageError(f"unknown dataset {name!r}" + did_you_mean(name, DATASETS)
                             + f"; known: {', '.join(DATASETS)}")
        out.append(name)
    if not out:
        raise UsageError(f"--datasets is empty; known: {', '.join(DATASETS)}")
    return tuple(d for d in DATASETS if d in out)


def parse_cases(cases: str | None, main: bool, all_: bool) -> list[str]:
    from cbench_builders.cases import specs as case_specs

    chosen = sum(bool(x) for x in (cases, main, all_))
    if chosen > 1:
        raise UsageError("give one of --cases, --main or --all")
    if main:
        return list(case_specs.MAIN_CASES)
    if all_:
        ids = case_specs.list_cases()
        if not ids:
            raise BuildError(f"no case specs in {case_specs.cases_dir()}")
        return ids
    if not cases:
        return []
    try:
        return case_specs.resolve_case_ids(cases)
    except BuildError as exc:
        raise UsageError(str(exc)) from None


def parse_ioi_sizes(text: str | None) -> dict[str, int]:
    if not text:
        return dict(ioi.DEFAULT_SIZES)
    parts = [p.strip() for p in str(text).split(",")]
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"--ioi-sizes wants TRAIN,VALIDATION,TEST as integers (got {text!r})") from None
    if len(nums) != 3 or min(nums) < 1:
        raise UsageError(f"--ioi-sizes wants three positive integers TRAIN,VALIDATION,TEST (got {text!r})")
    return dict(zip(ioi_vocab.SPLITS, nums))


# --------------------------------------------------------------------------- the case model
def case_model(case: str, tracr_dir: Path) -> counterfactuals.CaseModel:
    """The compiled Tracr artifact of ``case`` and its high-level model, as a CaseModel."""
    from cbench.artifacts.model import read_model_artifact
    from cbench_builders.cases.specs import load_case
    from cbench_builders.datasets.high_level import HighLevelModel

    spec = load_case(case)
    path = Path(tracr_dir) / f"tracr-case-{spec.id}"
    if not (path / "meta.json").is_file():
        raise BuildError(f"case {spec.id}: no compiled Tracr model at {path}; "
                         f"run `cbench build tracr --cases {spec.id}` first (or pass --tracr-dir)")
    art = read_model_artifact(path, verify=True)
    meta, circuit = art.meta, art.circuit or {}
    hl = HighLevelModel.from_artifact(art)
    nodes = high_level_nodes(circuit, hl.ops)

    def label_batch(seqs):
        return hl.labels(hl.encode(seqs))

    def interchange_batch(bases, sources, op):
        # one width for both (a longer source pads the bases with PAD); labels at the bases' positions
        n = len(bases)
        tokens = hl.encode(list(bases) + list(sources))
        return hl.to_labels(hl.run_with_interchange(tokens[:n], tokens[n:], op))[:, :len(bases[0])]

    sha = (meta.get("files") or {}).get("model.safetensors")
    return counterfactuals.CaseModel(
        case=spec.id, description=spec.description, task_type=meta["task_type"], vocab=tuple(spec.vocab),
        input_tokens=list(meta["input_tokens"]), bos_token=meta["bos_token"], pad_token=meta.get("pad_token"),
        output_classes=meta.get("output_classes"), min_seq_len=int(spec.min_seq_len),
        max_seq_len=int(spec.max_seq_len), label_positions=spec.label_positions, seed=int(spec.seed),
        ops=nodes, label_batch=label_batch, interchange_batch=interchange_batch, tracr_model_sha256=sha,
    )


def high_level_nodes(circuit: dict, interchangeable) -> list[dict]:
    """The high-level nodes of a case: every op of ``circuit.json``'s ``high_level.ops`` (in its
    order) that a head or an MLP computes and the high-level model can interchange; the inputs
    (``tokens``, ``indices``: the embeddings) are left out, selectors stay in."""
    can = set(interchangeable)
    out = []
    for op in (circuit.get("high_level") or {}).get("ops", []):
        comps = [c for c in op.get("components", []) if c != "input"]
        if op["name"] in can and comps:
            out.append({"name": op["name"], "type": op.get("type"), "components": comps})
    return out


# --------------------------------------------------------------------------- cards
def _canonical_command(datasets, cases=None, train_size=None, distinct=False, ioi_sizes=None, ioi_seed=None,
                       ioi_cfs=None) -> str:
    argv = ["cbench", "build", "datasets"]
    if cases:
        argv += ["--cases", ",".join(cases)]
    argv += ["--datasets", ",".join(datasets)]
    if train_size is not None:
        argv += ["--train-size", str(train_size)]
    if distinct:
        argv += ["--distinct-pairs"]
    if ioi_sizes is not None and ioi_sizes != ioi.DEFAULT_SIZES:
        argv += ["--ioi-sizes", ",".join(str(ioi_sizes[s]) for s in ioi_vocab.SPLITS)]
    if ioi_seed is not None and ioi_seed != ioi.DEFAULT_SEED:
        argv += ["--ioi-seed", str(ioi_seed)]
    if ioi_cfs is not None and tuple(ioi_cfs) != ioi.COUNTERFACTUAL_TYPES:
        argv += ["--ioi-counterfactuals", ",".join(c[: -len("_counterfactual")] for c in ioi_cfs)]
    return shlex.join(argv)


def _case_dirs(root: Path) -> list[str]:
    ids = [p.name[len("case-"):] for p in root.glob("case-*") if p.is_dir()]
    return sorted(ids, key=lambda c: (0, int(c), "") if c.isdigit() else (1, 0, c))


def _meta_of(path: Path) -> dict:
    raw = read_metadata(path).get(b"cbench")
    return json.loads(raw) if raw else {}


def write_counterfactuals_card(root: Path) -> Path:
    configs = []
    total = 0
    commands: dict[tuple, list[str]] = {}
    for case in _case_dirs(root):
        splits = []
        meta = None
        for split in counterfactuals.SPLITS:
            rel = counterfactuals.data_file(case, split)
            if (root / rel).is_file():
                meta = meta or _meta_of(root / rel)
                rows = _meta_of(root / rel).get("sizes", {}).get(split)
                splits.append({"name": split, "path": rel, "rows": rows})
                total += rows or 0
        if not splits or meta is None:
            continue
        bos_id = meta["input_tokens"].index(meta["bos_token"]) if meta["bos_token"] in meta["input_tokens"] else None
        pad = meta.get("pad_token")
        pad_id = meta["input_tokens"].index(pad) if pad is not None and pad in meta["input_tokens"] else None
        reps = meta.get("pairs_repeated", {})
        configs.append({
            "name": f"case-{case}", "case": case, "description": meta.get("description", ""),
            "task_type": meta["task_type"], "high_level_nodes": meta["high_level_nodes"], "ops": meta.get("ops", []),
            "input_space": meta["input_space"], "splits": splits, "splits_disjoint": meta["splits_disjoint"],
            "pairs": ("repeated in " + ", ".join(s for s in counterfactuals.SPLITS if reps.get(s))
                      if any(reps.values()) else "distinct"),
            "output_classes": meta.get("output_classes"), "input_tokens": meta["input_tokens"],
            "bos_token": meta["bos_token"], "bos_id": bos_id, "pad_token": pad, "pad_id": pad_id,
            "min_seq_len": meta["min_seq_len"], "max_seq_len": meta["max_seq_len"],
            "label_positions": meta.get("label_positions"), "seed": meta["seed"],
            "tracr_model_sha256": meta.get("tracr_model_sha256") or "unknown",
            "source_lengths": meta.get("source_lengths"),
        })
        key = (meta["sizes"]["train"], bool(meta.get("distinct_pairs")))
        commands.setdefault(key, []).append(case)
    if not configs:
        raise BuildError(f"{root}: no counterfactual configs to describe")
    command = "\n".join(_canonical_command(["counterfactuals"], cases, train_size=ts, distinct=d)
                        for (ts, d), cases in sorted(commands.items()))
    text = render_card("dataset_counterfactuals", {
        "repo": _repo("counterfactuals"), "configs": configs, "size_category": size_category(total),
        "command": command, "cbench_version": cbench.__version__,
        "enumerate_limit": f"{counterfactuals.ENUMERATE_LIMIT:,}", "tie_gap": f"{TIE_GAP:g}",
    }, data_root=root)
    return _write_text(root / "README.md", text)


def write_circuits_card(root: Path) -> Path:
    configs, total = [], 0
    for case in _case_dirs(root):
        rel = circuits_dataset.data_file(case)
        if not (root / rel).is_file():
            continue
        meta = _meta_of(root / rel)
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(root / rel).metadata.num_rows
        total += rows
        configs.append({"name": f"case-{case}", "case": case, "path": rel, "rows": rows,
                        "tracr_graph": meta["tracr_graph"], "siit_graph": meta.get("siit_graph"),
                        "n_tracr_circuit": meta["tracr_circuit_edges"],
                        "n_siit_circuit": meta.get("siit_circuit_edges")})
    if not configs:
        raise BuildError(f"{root}: no circuit configs to describe")
    text = render_card("dataset_circuits", {
        "repo": _repo("circuits"), "configs": configs, "size_category": size_category(total),
        "command": _canonical_command(["circuits"], [c["case"] for c in configs]),
        "cbench_version": cbench.__version__,
    }, data_root=root)
    return _write_text(root / "README.md", text)


def write_ioi_card(root: Path, build: ioi.IOIBuild) -> Path:
    vocab = json.loads(build.vocab_path.read_text(encoding="utf-8"))
    splits = [{"name": s, "path": ioi.data_file(s), "rows": build.sizes[s],
               "n_templates": len(ioi_vocab.TEMPLATES[s]), "n_names": len(ioi_vocab.NAMES[s]),
               "n_places": len(ioi_vocab.PLACES[s]), "n_objects": len(ioi_vocab.OBJECTS[s])}
              for s in build.files]
    text = render_card("dataset_ioi", {
        "repo": _repo("ioi"), "splits": splits, "size_category": size_category(sum(build.sizes.values())),
        "counterfactuals": [{"name": c, "description": ioi.DESCRIPTIONS[c]} for c in build.counterfactuals],
        "vocab_file": ioi.VOCAB_FILE, "vocab_size": len(vocab["tokens"]), "n_names": len(vocab["name_tokens"]),
        "split_pattern": vocab["split_pattern"], "seed": build.seed, "cbench_version": cbench.__version__,
        "command": _canonical_command(["ioi"], ioi_sizes=build.sizes, ioi_seed=build.seed,
                                      ioi_cfs=build.counterfactuals),
    }, data_root=root)
    return _write_text(root / "README.md", text)


def _write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- the build
def build_datasets(cases: list[str], datasets=DATASETS, *, train_size: int | None = None, distinct: bool = False,
                   tracr_dir: Path = Path("build/tracr"), siit_dir: Path | None = Path("build/siit"),
                   out: Path = Path("build/datasets"), ioi_sizes: dict | None = None,
                   ioi_seed: int = ioi.DEFAULT_SEED, ioi_counterfactuals=None, progress: bool = False,
                   echo=None) -> dict:
    """Build the chosen datasets; returns a summary {dataset: {case or split: info}}."""
    out = Path(out)
    datasets = tuple(datasets)
    summary: dict = {}
    needs_cases = [d for d in datasets if d != "ioi"]
    if needs_cases and not cases:
        raise UsageError(f"say which cases to build {', '.join(needs_cases)} for: --cases 3,33, --main or --all")
    cfs = ioi.resolve_counterfactuals(ioi_counterfactuals) if "ioi" in datasets else None
    if train_size is not None and train_size < 1:
        raise UsageError(f"--train-size must be at least 1 (got {train_size})")
    say = echo or (lambda msg: None)

    # everything that can be refused is refused before any work: sizes against each case's input
    # space (from its spec alone), then the compiled models the chosen datasets need
    plans = {}
    if "counterfactuals" in datasets:
        from cbench_builders.cases.specs import load_case

        for case in cases:
            spec = load_case(case)
            ts = train_size if train_size is not None else counterfactuals.default_train_size(spec)
            plans[case] = counterfactuals.plan_for_spec(spec, counterfactuals.split_sizes(ts), distinct)
    if needs_cases:
        missing = [c for c in cases if not (Path(tracr_dir) / f"tracr-case-{c}" / "meta.json").is_file()]
        if missing:
            raise BuildError(f"no compiled Tracr model under {tracr_dir} for case(s) {', '.join(missing)}; "
                             f"run `cbench build tracr --cases {','.join(missing)}` first (or pass --tracr-dir)")

    if "circuits" in datasets:
        root = out / "circuits"
        summary["circuits"] = {}
        for case in cases:
            b = circuits_dataset.build_circuits_case(case, tracr_dir, root, siit_dir)
            summary["circuits"][case] = {"rows": b.n_edges, "circuit_edges": b.n_tracr_circuit,
                                         "bytes": b.path.stat().st_size}
            say(f"circuits case-{case}: {b.n_edges} edges, {b.n_tracr_circuit} in the Tracr circuit")
        write_circuits_card(root)

    if "counterfactuals" in datasets:
        root = out / "counterfactuals"
        summary["counterfactuals"] = {}
        total_rows = sum(sum(p.sizes.values()) for p in plans.values())
        err = click.get_text_stream("stderr")
        bar = click.progressbar(length=total_rows, label="counterfactual pairs", file=err) \
            if progress and err.isatty() else None
        import torch

        threads = torch.get_num_threads()
        # the models are tiny: one intra-op thread is several times faster than two fighting
        # for cores (measured: 0.18 s vs 1.7 s per batch of 4096 on this machine under load)
        torch.set_num_threads(1)
        try:
            if bar is not None:
                bar.__enter__()
            for case, plan in plans.items():
                cm = case_model(case, tracr_dir)
                b = counterfactuals.build_case_counterfactuals(
                    cm, root, plan=plan, progress=(bar.update if bar is not None else None))
                summary["counterfactuals"][cm.case] = {
                    "rows": b.sizes, "seconds": round(b.seconds, 2),
                    "bytes": sum(p.stat().st_size for p in b.files.values()),
                    "input_space": b.metadata["input_space"], "splits_disjoint": b.metadata["splits_disjoint"]}
        finally:
            torch.set_num_threads(threads)
            if bar is not None:
                bar.__exit__(None, None, None)
        write_counterfactuals_card(root)
        for case, info in summary["counterfactuals"].items():
            say(f"counterfactuals case-{case}: {info['rows']} rows in {info['seconds']} s, {info['bytes']} bytes")

    if "ioi" in datasets:
        root = out / "ioi"
        t0 = time.perf_counter()
        b = ioi.build_ioi(root, ioi_sizes, ioi_seed, cfs)
        write_ioi_card(root, b)
        summary["ioi"] = {"rows": b.sizes, "seconds": round(time.perf_counter() - t0, 2),
                          "bytes": sum(p.stat().st_size for p in b.files.values())}
        say(f"ioi: {b.sizes} rows in {summary['ioi']['seconds']} s, {summary['ioi']['bytes']} bytes")
    return summary


@click.command("datasets")
@click.option("--cases", help="comma-separated case ids, e.g. 3,33")
@click.option("--main", "main_cases", is_flag=True, help="the 16 main cases of the InterpBench paper")
@click.option("--all", "all_cases", is_flag=True, help="every case in model_zoo/cases")
@click.option("--datasets", "datasets_", default=",".join(DATASETS), show_default=True,
              help="which datasets to build (comma-separated)")
@click.option("--train-size", type=counts(1, MAX_COUNT), default=None,
              help="counterfactual train pairs per case (default: the case spec's, else 20000); "
                   "validation is 20% of it, test the same as validation")
@click.option("--distinct-pairs", is_flag=True, help="refuse to repeat a (base, source) pair when a split asks "
              "for more pairs than its inputs give")
@click.option("--tracr-dir", default="build/tracr", type=click.Path(path_type=Path), show_default=True,
              help="where the compiled Tracr models are (tracr-case-<id>/)")
@click.option("--siit-dir", default="build/siit", type=click.Path(path_type=Path), show_default=True,
              help="where SIIT models are (case-<id>/), for the circuits dataset's in_circuit_siit")
@click.option("--out", default="build/datasets", type=click.Path(path_type=Path), show_default=True, callback=check_out_tree,
              help="one directory per dataset repository is written under it")
@click.option("--ioi-sizes", default=None, help="IOI rows per split as TRAIN,VALIDATION,TEST [10000,1000,1000]")
@click.option("--ioi-seed", type=SEED_TYPE, default=ioi.DEFAULT_SEED, show_default=True)
@click.option("--ioi-counterfactuals", default=None,
              help="comma-separated IOI counterfactual types (default: all eight of MIB's Table 6)")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar or summary")
def build_datasets_cmd(cases, main_cases, all_cases, datasets_, train_size, distinct_pairs, tracr_dir, siit_dir,
                       out, ioi_sizes, ioi_seed, ioi_counterfactuals, quiet):
    """Build the counterfactuals, circuits and IOI datasets (parquet + dataset cards)."""
    datasets = parse_datasets(datasets_)
    case_ids = parse_cases(cases, main_cases, all_cases)
    if all_cases and any(d != "ioi" for d in datasets):
        # --all means every case that compiled: the zoo README lists the ones Tracr rejects
        compiled = [c for c in case_ids if (Path(tracr_dir) / f"tracr-case-{c}" / "meta.json").is_file()]
        skipped = [c for c in case_ids if c not in compiled]
        if not compiled:
            raise BuildError(f"no compiled Tracr models under {tracr_dir}; run `cbench build tracr --all` first")
        if skipped and not quiet:
            click.echo(f"skipping {len(skipped)} case(s) without a compiled Tracr model under {tracr_dir}: "
                       f"{', '.join(skipped)}", err=True)
        case_ids = compiled
    sizes = parse_ioi_sizes(ioi_sizes) if "ioi" in datasets else None
    cfs = ioi_counterfactuals.split(",") if ioi_counterfactuals is not None else None
    t0 = time.perf_counter()
    try:
        summary = build_datasets(case_ids, datasets, train_size=train_size, distinct=distinct_pairs,
                                 tracr_dir=tracr_dir, siit_dir=siit_dir, out=out, ioi_sizes=sizes, ioi_seed=ioi_seed,
                                 ioi_counterfactuals=cfs, progress=not quiet, echo=None)
    except CbenchError:
        raise
    except MemoryError:
        raise BuildError("out of memory building the datasets; try a smaller --train-size") from None
    if not quiet:
        click.echo(format_summary(summary))
        click.echo(f"wrote {', '.join(datasets)} under {out} in {time.perf_counter() - t0:.1f} s", err=True)


def format_summary(summary: dict) -> str:
    """A plain-text table of what was built."""
    lines = []
    cfs = summary.get("counterfactuals") or {}
    if cfs:
        lines.append(f"{'counterfactuals':<16} {'train':>7} {'valid':>6} {'test':>6} {'inputs':>12} {'disjoint':>8} "
                     f"{'seconds':>8} {'KiB':>8}")
        for case, info in cfs.items():
            r = info["rows"]
            lines.append(f"{'case-' + case:<16} {r['train']:>7} {r['validation']:>6} {r['test']:>6} "
                         f"{info['input_space']:>12} {'yes' if info['splits_disjoint'] else 'no':>8} "
                         f"{info['seconds']:>8.1f} {info['bytes'] / 1024:>8.1f}")
    circ = summary.get("circuits") or {}
    if circ:
        lines.append(f"{'circuits':<16} {'edges':>7} {'in circuit':>11} {'KiB':>8}")
        for case, info in circ.items():
            lines.append(f"{'case-' + case:<16} {info['rows']:>7} {info['circuit_edges']:>11} {info['bytes'] / 1024:>8.1f}")
    if summary.get("ioi"):
        info = summary["ioi"]
        r = info["rows"]
        lines.append(f"ioi: train {r.get('train', 0)}, validation {r.get('validation', 0)}, test {r.get('test', 0)} "
                     f"rows in {info['seconds']:.1f} s, {info['bytes'] / 1024:.1f} KiB")
    return "\n".join(lines)
