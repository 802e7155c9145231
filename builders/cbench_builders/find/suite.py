"""``cbench build find``: the FIND function-interpretation suite (Schwettmann et al., 2023).

Samples 1,000 numeric and 1,000 string functions from a seed, each with its ground-truth spec
(evaluated by :mod:`cbench.find.functions`), code, domain, corruption interval and test set,
trains the two-layer ReLU MLPs that approximate 15 % of the numeric functions, and writes::

    <out>/find/README.md
    <out>/find/numeric/test-00000-of-00001.parquet
    <out>/find/numeric/mlp.safetensors          # every MLP's weights, keys "<id>.w1" ... "<id>.b2"
    <out>/find/strings/test-00000-of-00001.parquet

The MLPs are trained as FIND trains them (:mod:`cbench_builders.find.mlp`) and the card states
each one's fit. Same seed, same sizes: same bytes (numpy float64 training from a fixed seed).
The paper's language-model-backed "synthetic neural modules" need a Vicuna server and are not built.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import click
import numpy as np

import cbench
from cbench.cli.options import SEED_TYPE, check_out_tree, counts
from cbench.errors import UsageError
from cbench.find import functions as F
from cbench_builders.find import mlp as M
from cbench_builders.release.cards import render_card, size_category
from cbench_builders.release.parquet import write_parquet

REPO = "cbench/find"
DEFAULT_SEED = 0
DATA_FILE = "test-00000-of-00001.parquet"
MLP_FILE = "mlp.safetensors"

#: numeric sub-categories and their shares (the issue's split of the paper's 1,000 functions)
NUMERIC_SHARES = {"atomic": 0.40, "noisy": 0.15, "corrupted": 0.15, "composition": 0.15, "neural": 0.15}
#: string sub-categories: 30 % atomic (two thirds plain operations, one third copycat-style), 70 % compositions
STRING_SHARES = {"atomic": 0.20, "copycat": 0.10, "composition": 0.70}
MLP_FAMILIES = ("linear", "polynomial", "absolute", "relu", "leaky_relu", "sigmoid", "tanh", "sin", "gaussian",
                "step", "rectangle")
MLP_HIDDEN = M.FIND_RECIPE.hidden
N_STRING_TESTS = 10

WORDS = """apple banana cherry dog elephant forest garden house island jungle kitten lemon mountain night
ocean pencil queen river sunset tiger umbrella valley window yellow zebra anchor bridge candle dragon engine
feather guitar hammer igloo jacket kettle ladder magnet needle orange parrot quiet rabbit saddle turtle unicorn
violin walnut xylophone yogurt zipper almond basket castle desert eagle falcon glacier harbor insect jelly koala
lantern meadow nectar orbit planet quartz rocket silver thunder upper velvet wander breeze cactus dolphin
ember fabric galaxy honey ivory jasmine kernel lotus marble noble oyster pepper quill rain sugar tulip urban
vapor whale box yarn zone art bee cat day egg fig gum hat ink jam key lip map nut owl pie rug sea tea van web
python circuit neuron vector matrix signal random string number letter simple puzzle copycat""".split()


# --------------------------------------------------------------------------- numeric sampling
def _r(v: float, nd: int = 2) -> float:
    return float(round(float(v), nd))


def _int_nonzero(rng, lo=-30, hi=30) -> int:
    while True:
        v = int(rng.integers(lo, hi + 1))
        if v:
            return v


def sample_atomic(rng: np.random.Generator, family: str, *, max_degree: int = 4) -> dict:
    if family == "polynomial":
        deg = int(rng.integers(2, max_degree + 1))
        coef = [_r(rng.uniform(-5, 5), 1) for _ in range(deg + 1)]
        if coef[-1] == 0:
            coef[-1] = 1.0
        return {"kind": "polynomial", "coef": coef}
    p: dict = {}
    if family == "leaky_relu":
        p = {"alpha": _r(rng.uniform(0.01, 0.5))}
    elif family in ("sigmoid", "tanh"):
        p = {"c": _r(rng.uniform(-50, 50), 1), "s": _r(rng.uniform(1, 20), 1)}
    elif family == "sin":
        per = _r(rng.uniform(5, 100), 1)
        p = {"p": per, "c": _r(rng.uniform(0, per), 1)}
    elif family == "square_wave":
        per = _r(rng.uniform(10, 100), 1)
        p = {"p": per, "c": _r(rng.uniform(0, per), 1)}
    elif family == "gaussian":
        p = {"c": _r(rng.uniform(-80, 80), 1), "w": _r(rng.uniform(3, 30), 1)}
    elif family == "exp":
        p = {"s": _r(rng.uniform(20, 60), 1)}
    elif family == "rational":
        p = {"c": _int_nonzero(rng, -50, 50)}
    elif family == "step":
        p = {"t": _r(rng.uniform(-100, 100), 1)}
    elif family in ("floor", "ceil"):
        p = {"s": float(rng.choice([1, 2, 5, 10, 20]))}
    elif family == "rectangle":
        lo = _r(rng.uniform(-100, 80), 1)
        p = {"lo": lo, "hi": _r(lo + rng.uniform(5, 50), 1)}
    a = 1 if family == "constant" else _int_nonzero(rng)
    b = _int_nonzero(rng) if family == "constant" else int(rng.integers(-30, 31))
    return {"kind": "atomic", "family": family, "params": p, "a": a, "b": b}


def _defined_mean_rms(spec) -> tuple[float, float]:
    y = F.numeric_mean(spec, F.test_grid())
    y = y[np.isfinite(y)]
    return float(np.mean(y)), float(np.sqrt(np.mean(y ** 2)))


def _sig(v: float, digits: int = 4) -> float:
    return float(f"{v:.{digits}g}")


def sample_noise(rng, base) -> dict:
    _, rms = _defined_mean_rms(base)
    rms = max(rms, 1e-3)
    dist = str(rng.choice(["normal", "uniform", "poisson"]))
    if dist == "normal":
        return {"dist": dist, "scale": _sig(rng.uniform(0.05, 0.3) * rms)}
    if dist == "uniform":
        return {"dist": dist, "scale": _sig(rng.uniform(0.05, 0.3) * rms * math.sqrt(3))}
    lam = int(rng.integers(1, 6))
    return {"dist": dist, "lam": lam, "scale": _sig(rng.uniform(0.02, 0.1) * rms / math.sqrt(lam))}


def sample_interval(rng) -> list:
    a = _r(rng.uniform(-100, 100), 1)
    shape = str(rng.choice(["finite", "right", "left"]))
    if shape == "finite":
        return [a, _r(a + rng.uniform(5, 20), 1)]
    return [a, None] if shape == "right" else [None, a]


def sample_numeric(rng: np.random.Generator, subcategory: str) -> dict:
    if subcategory == "atomic":
        return sample_atomic(rng, str(rng.choice(F.NUMERIC_FAMILIES)))
    if subcategory == "noisy":
        base = sample_atomic(rng, str(rng.choice(F.NUMERIC_FAMILIES)))
        return {"kind": "noisy", "base": base, "noise": sample_noise(rng, base)}
    if subcategory == "corrupted":
        base = sample_atomic(rng, str(rng.choice(F.NUMERIC_FAMILIES)))
        mu, _ = _defined_mean_rms(base)
        return {"kind": "corrupted", "base": base, "interval": sample_interval(rng), "mu": _sig(mu), "sigma": 0.1}
    if subcategory == "composition":
        left = sample_atomic(rng, str(rng.choice(F.COMPOSABLE)), max_degree=3)
        right = sample_atomic(rng, str(rng.choice(F.COMPOSABLE)), max_degree=3)
        return {"kind": "compose", "op": str(rng.choice(["+", "*"])), "left": left, "right": right}
    if subcategory == "neural":
        return {"kind": "mlp", "key": "", "hidden": MLP_HIDDEN,
                "target": sample_atomic(rng, str(rng.choice(MLP_FAMILIES)), max_degree=2)}
    raise ValueError(subcategory)


def _counts(n: int, shares: dict) -> dict:
    counts = {k: int(math.floor(n * v)) for k, v in shares.items()}
    first = next(iter(shares))
    counts[first] += n - sum(counts.values())
    return counts


# --------------------------------------------------------------------------- string sampling
def _letter(rng, pool=F.ALPHABET) -> str:
    return str(pool[int(rng.integers(len(pool)))])


def sample_string_op(rng, op: str) -> dict:
    p: dict = {}
    common = "aeiourstnl"
    if op == "replace":
        old = _letter(rng, common)
        new = _letter(rng)
        while new == old:
            new = _letter(rng)
        p = {"old": old, "new": new}
    elif op == "remove_char":
        p = {"char": _letter(rng, common)}
    elif op in ("append", "prepend"):
        p = {"text": "".join(_letter(rng) for _ in range(int(rng.integers(1, 4))))}
    elif op == "repeat":
        p = {"n": int(rng.integers(2, 4))}
    elif op == "take_first":
        p = {"k": int(rng.integers(2, 6))}
    elif op in ("drop_first", "drop_last", "rotate_left"):
        p = {"k": int(rng.integers(1, 4))}
    elif op == "interleave":
        p = {"char": _letter(rng, "-_.*|")}
    elif op in ("shift_last", "shift_first"):
        p = {"k": int(rng.choice([1, 2, -1]))}
    elif op == "caesar":
        p = {"k": int(rng.integers(1, 26))}
    return {"kind": "atomic", "op": op, "params": p}


_PROBES = ("apple", "banana", "kitten", "ocean", "zebra", "python", "queen", "xylophone", "ab", "z")


def sample_string(rng, subcategory: str) -> dict:
    if subcategory == "atomic":
        return sample_string_op(rng, str(rng.choice(F.STRING_OPS)))
    if subcategory == "copycat":
        return sample_string_op(rng, str(rng.choice(F.COPYCAT_OPS)))
    ops = F.STRING_OPS + F.COPYCAT_OPS
    while True:  # refuse compositions that are the identity or equal one of their parts
        inner, outer = (sample_string_op(rng, str(rng.choice(ops))) for _ in range(2))
        spec = {"kind": "compose", "inner": inner, "outer": outer}
        f, fi, fo = (F.string_callable(s) for s in (spec, inner, outer))
        outs = [f(s) for s in _PROBES]
        if outs == list(_PROBES) or outs == [fi(s) for s in _PROBES] or outs == [fo(s) for s in _PROBES]:
            continue
        return spec


def _chars_of(spec) -> list[str]:
    if spec["kind"] == "compose":
        return _chars_of(spec["inner"]) + _chars_of(spec["outer"])
    p = spec.get("params", {})
    return [p[k] for k in ("old", "char") if k in p and p[k] in F.ALPHABET]


def string_tests(rng, spec) -> list[str]:
    """10 test inputs: words from a list; when the function acts on particular letters, at least
    six of them contain those letters (one is inserted into a word if needed)."""
    picks = [WORDS[i] for i in rng.choice(len(WORDS), size=N_STRING_TESTS, replace=False)]
    for c in _chars_of(spec):
        for i in range(6):
            if c not in picks[i]:
                w = picks[i]
                pos = int(rng.integers(0, len(w) + 1))
                picks[i] = w[:pos] + c + w[pos:]
    return picks


# --------------------------------------------------------------------------- the build
def build_suite(out: Path, seed: int = DEFAULT_SEED, n_numeric: int = 1000, n_strings: int = 1000) -> dict:
    import pyarrow as pa

    if n_numeric < 0 or n_strings < 0 or n_numeric + n_strings == 0:
        raise UsageError("--n-numeric and --n-strings must be non-negative and not both 0")
    root = Path(out) / "find"
    t0 = time.perf_counter()
    summary: dict = {"seed": seed}
    rng = np.random.default_rng([seed, 0])
    numeric = []
    subcats = [s for s, c in _counts(n_numeric, NUMERIC_SHARES).items() for _ in range(c)]
    order = rng.permutation(len(subcats)) if subcats else []
    for i, j in enumerate(order):
        sub = subcats[int(j)]
        spec = sample_numeric(rng, sub)
        fid = f"n{i:04d}"
        if sub == "neural":
            spec["key"] = fid
        numeric.append((fid, sub, spec))
    targets = {f: sp["target"] for f, _, sp in numeric if sp["kind"] == "mlp"}
    c0 = time.process_time()
    weights, final_loss = M.train(targets, seed)
    summary["mlp_cpu_seconds"] = round(time.process_time() - c0, 1)
    fits = M.measure_fits(weights, targets, seed, final_loss)
    if n_numeric:
        rows = {k: [] for k in ("id", "subcategory", "family", "spec", "code", "domain", "corrupted",
                                "interval_lo", "interval_hi", "noise")}
        for fid, sub, spec in numeric:
            rows["id"].append(fid)
            rows["subcategory"].append(sub)
            rows["family"].append(F.numeric_family(spec))
            rows["spec"].append(json.dumps(spec, sort_keys=True))
            rows["code"].append(F.numeric_code(spec))
            rows["domain"].append(F.numeric_domain(spec))
            iv = spec.get("interval") if spec["kind"] == "corrupted" else None
            rows["corrupted"].append(iv is not None)
            rows["interval_lo"].append(None if iv is None or iv[0] is None else float(iv[0]))
            rows["interval_hi"].append(None if iv is None or iv[1] is None else float(iv[1]))
            rows["noise"].append(spec["noise"]["dist"] if spec["kind"] == "noisy" else None)
        schema = pa.schema([("id", pa.string()), ("subcategory", pa.string()), ("family", pa.string()),
                            ("spec", pa.string()), ("code", pa.string()), ("domain", pa.string()),
                            ("corrupted", pa.bool_()), ("interval_lo", pa.float64()), ("interval_hi", pa.float64()),
                            ("noise", pa.string())])
        meta = {"config": "numeric", "seed": seed, "test_grid": [F.GRID_LO, F.GRID_HI, F.GRID_N],
                "mlp_file": MLP_FILE, "cbench_version": cbench.__version__}
        table = pa.table(rows, schema=schema).replace_schema_metadata({"cbench": json.dumps(meta, sort_keys=True)})
        write_parquet(table, root / "numeric" / DATA_FILE)
        if weights:
            import torch

            from cbench.artifacts.serialization import _safetensors_bytes

            # cbench's own writer: safetensors' keeps the metadata in a hash map, so a file with two
            # metadata keys came out in either key order (same seed, different bytes)
            tmp = root / "numeric" / f".{MLP_FILE}.tmp"
            tmp.write_bytes(_safetensors_bytes({k: torch.from_numpy(np.ascontiguousarray(weights[k])) for k in weights},
                                               {"format": "cbench-find-mlp",
                                                "recipe": json.dumps(M.FIND_RECIPE.as_dict())}))
            tmp.replace(root / "numeric" / MLP_FILE)
        elif (root / "numeric" / MLP_FILE).exists():
            (root / "numeric" / MLP_FILE).unlink()
        summary["numeric"] = _counts(n_numeric, NUMERIC_SHARES)

    if n_strings:
        srng = np.random.default_rng([seed, 1])
        subcats = [s for s, c in _counts(n_strings, STRING_SHARES).items() for _ in range(c)]
        rows = {k: [] for k in ("id", "subcategory", "family", "spec", "code", "test_inputs", "test_outputs")}
        for i, j in enumerate(srng.permutation(len(subcats))):
            sub = subcats[int(j)]
            spec = sample_string(srng, sub)
            tests = string_tests(srng, spec)
            f = F.string_callable(spec)
            rows["id"].append(f"s{i:04d}")
            rows["subcategory"].append(sub)
            rows["family"].append(F.string_family(spec))
            rows["spec"].append(json.dumps(spec, sort_keys=True))
            rows["code"].append(F.string_code(spec))
            rows["test_inputs"].append(tests)
            rows["test_outputs"].append([f(t) for t in tests])
        schema = pa.schema([("id", pa.string()), ("subcategory", pa.string()), ("family", pa.string()),
                            ("spec", pa.string()), ("code", pa.string()), ("test_inputs", pa.list_(pa.string())),
                            ("test_outputs", pa.list_(pa.string()))])
        meta = {"config": "strings", "seed": seed, "cbench_version": cbench.__version__}
        table = pa.table(rows, schema=schema).replace_schema_metadata({"cbench": json.dumps(meta, sort_keys=True)})
        write_parquet(table, root / "strings" / DATA_FILE)
        summary["strings"] = _counts(n_strings, STRING_SHARES)

    configs = [c for c in ("numeric", "strings") if (root / c / DATA_FILE).is_file()]
    text = render_card("dataset_find", {
        "repo": REPO, "configs": [{"name": c, "path": f"{c}/{DATA_FILE}"} for c in configs],
        "size_category": size_category(n_numeric + n_strings), "seed": seed, "n_numeric": n_numeric,
        "n_strings": n_strings, "numeric_counts": summary.get("numeric", {}),
        "string_counts": summary.get("strings", {}), "grid": f"[{F.GRID_LO:g}, {F.GRID_HI:g}] in {F.GRID_N} points",
        "mlp": M.FIND_RECIPE, "mlp_families": ", ".join(MLP_FAMILIES), "mlp_fits": fits, "mlp_summary": M.summarise(fits),
        "fit_points": M.FIT_POINTS, "test_range": M.TEST_RANGE,
        "families": ", ".join(F.NUMERIC_FAMILIES), "composable": ", ".join(F.COMPOSABLE),
        "string_ops": ", ".join(F.STRING_OPS), "copycat_ops": ", ".join(F.COPYCAT_OPS),
        "cbench_version": cbench.__version__,
        "command": f"cbench build find --seed {seed} --n-numeric {n_numeric} --n-strings {n_strings}",
    })
    (root / "README.md").write_text(text, encoding="utf-8")
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    summary["bytes"] = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return summary


@click.command("find")
@click.option("--out", default="build/datasets", type=click.Path(path_type=Path), show_default=True,
              callback=check_out_tree, help="the suite is written to OUT/find/")
@click.option("--seed", type=SEED_TYPE, default=DEFAULT_SEED, show_default=True)
@click.option("--n-numeric", type=counts(0, 100_000), default=1000, show_default=True)
@click.option("--n-strings", type=counts(0, 100_000), default=1000, show_default=True)
def build_find_cmd(out, seed, n_numeric, n_strings):
    """Build the FIND suite (numeric and string functions with known answers) as a dataset."""
    s = build_suite(out, seed, n_numeric, n_strings)
    click.echo(f"find: numeric {s.get('numeric', {})}, strings {s.get('strings', {})}; "
               f"{s['bytes'] / 1024:.0f} KiB in {s['seconds']} s under {Path(out) / 'find'}"
               + (f"; MLP training {s['mlp_cpu_seconds']} CPU s" if "mlp_cpu_seconds" in s else ""))
