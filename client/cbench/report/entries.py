"""The leaderboard's data: entries (bench methods and submissions) with their AUROC, CPR and CMD
per case, read from the bench's results and the submissions kept in the site; ranking by coverage;
the pairwise tests.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cbench.errors import CbenchError, UsageError

ORACLE_METHODS = ("activation-patching",)
RANDOM_METHODS = ("random",)


@dataclass
class Entry:
    """A row of the leaderboard: a bench method or a submission."""

    name: str
    kind: str  # "method", "oracle", "random" or "submission"
    auroc: dict = field(default_factory=dict)  # case -> edge AUROC (None: failed)
    auroc_mib: dict = field(default_factory=dict)  # case -> MIB's greedy-pruned edge AUROC (None: not defined)
    node_auroc: dict = field(default_factory=dict)
    runtime: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)  # case -> edge-scores document
    cpr: dict = field(default_factory=dict)  # case -> CPR (None: not measured)
    cmd: dict = field(default_factory=dict)
    by_tier: dict = field(default_factory=dict)  # tier -> {"rank", "mib", "n"}: both AUROC kinds (auroc_by_tier)

    @property
    def slug(self) -> str:
        return slug(self.name)

    def values(self) -> list[float]:
        return [v for v in self.auroc.values() if v is not None]

    @property
    def covered(self) -> tuple:
        """The cases this entry has an edge AUROC for."""
        return tuple(c for c, v in self.auroc.items() if v is not None)

    def mean_over(self, cases) -> float | None:
        v = [self.auroc[c] for c in cases if self.auroc.get(c) is not None]
        return float(np.mean(v)) if v and len(v) == len(list(cases)) else None

    @property
    def mean(self) -> float | None:
        v = self.values()
        return float(np.mean(v)) if v else None

    @property
    def std(self) -> float | None:
        v = self.values()
        return float(np.std(v)) if v else None

    @staticmethod
    def _mean(d: dict) -> float | None:
        v = [x for x in d.values() if x is not None]
        return float(np.mean(v)) if v else None

    @property
    def mean_mib(self) -> float | None:
        """Mean of MIB's greedy-pruned AUROC over the cases that have one."""
        return self._mean(self.auroc_mib)

    @property
    def mean_cpr(self) -> float | None:
        return self._mean(self.cpr)

    @property
    def mean_cmd(self) -> float | None:
        return self._mean(self.cmd)

    @property
    def mean_runtime(self) -> float | None:
        return self._mean(self.runtime)


@dataclass
class CaseInfo:
    case: str
    model: str  # the model's name, e.g. case-3
    artifact: object
    truth: list


@dataclass
class Partial:
    """An entry over fewer cases than the bench: ranked against every entry over its cases."""

    entry: Entry
    mean: float | None  # over its own cases
    rank: int
    of: int  # entries with a score on every one of its cases


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "entry"


def _case_key(case: str):
    return (0, int(case), "") if str(case).isdigit() else (1, 0, str(case))


def read_bench(results_dir: Path) -> dict:
    """The bench's results.json (checked), with a message that says what to run when it is missing."""
    from cbench.schemas import check, read_json

    path = Path(results_dir) / "results.json"
    if not path.is_file():
        raise UsageError(f"{results_dir}: no results.json; run `cbench bench --out {results_dir}` first")
    doc = read_json(path)
    check(doc, "results", source=str(path))
    if doc.get("kind") != "bench":
        raise UsageError(f"{path}: a {doc.get('kind')!r} results document, not the results of `cbench bench`")
    return doc


def _load_case(case: str, model_path: str | None) -> CaseInfo:
    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.bench import _resolve
    from cbench.scoring.ground_truth import circuit_edge_names

    art = read_model_artifact(model_path) if model_path and Path(model_path).is_dir() else _resolve(case)[1]
    if not art.circuit:
        raise CbenchError(f"case {case}: the model has no ground-truth circuit")
    name = f"case-{case}" if art.model_kind == "siit" else f"{art.model_kind}-case-{case}"
    return CaseInfo(case, name, art, circuit_edge_names(art.graph, art.circuit))


def score_doc(info: CaseInfo, doc: dict, no_signal=None):
    """Score an edge-scores document against the case's truth (leaving out the bench's no-signal
    edges when this version of the scoring takes them)."""
    from cbench.scoring.ground_truth import score_against_truth

    kwargs = {}
    if no_signal and "no_signal" in inspect.signature(score_against_truth).parameters:
        kwargs["no_signal"] = no_signal
    return score_against_truth(info.artifact.graph, doc, info.truth, **kwargs)


def _no_signal(bench: dict, case: str):
    """The ground-truth edges the bench left out of the case's ROC (None when it counted them)."""
    if bench["inputs"].get("include_no_signal"):
        return None
    marks = ((bench["results"].get("no_signal_edges") or {}).get(case) or {}).get("edges")
    return marks or None


def mib_auroc_of(info: CaseInfo, doc: dict) -> float | None:
    """MIB's greedy-pruned edge AUROC of a submitted document (the routine the bench uses for its
    methods, :func:`cbench.scoring.mib_protocol.mib_auroc`); None where it is undefined."""
    from cbench.scoring.faithfulness import edge_score_vector
    from cbench.scoring.mib_protocol import mib_auroc

    v = mib_auroc(info.artifact.graph, edge_score_vector(info.artifact.graph, doc), info.truth).auroc
    return float(v) if math.isfinite(v) else None


def auroc_by_tier(entries: list["Entry"], bench: dict) -> dict:
    """``{tier: {entry: {"rank", "mib", "n"}}}``: both AUROC kinds per tier. The bench's methods
    show the bench's own ``results.auroc_by_tier``; submissions are averaged here with the same
    routine (:func:`cbench.scoring.mib_protocol.side_by_side`) over the tiers of the bench's
    ``results.model_kind``."""
    from cbench.scoring.mib_protocol import side_by_side

    res = bench["results"]
    kept = res.get("auroc_by_tier")
    tiers = res.get("model_kind") or {}
    computed = side_by_side({c: {e.name: e.auroc.get(c) for e in entries} for c in res.get("auroc") or {}},
                            {c: {e.name: e.auroc_mib.get(c) for e in entries} for c in res.get("auroc") or {}},
                            tiers, [e.name for e in entries])
    if kept is None:  # results of a bench older than the MIB column
        return computed
    out = {tier: {m: dict(v) for m, v in row.items()} for tier, row in kept.items()}
    for e in entries:
        if e.kind != "submission":
            continue
        for tier, row in computed.items():
            if e.name in row:
                out.setdefault(tier, {})[e.name] = row[e.name]
    return out


def faithfulness_of(info: CaseInfo, doc: dict, bench: dict) -> tuple[float | None, float | None]:
    """CPR and CMD of a submitted document on the bench's pairs for its case (None, None when
    they cannot be measured here)."""
    from cbench.scoring.faithfulness import edge_score_vector, evaluate_faithfulness
    from cbench.scoring.task import case_from_artifact, pair_data

    inputs = bench["inputs"]
    try:
        sc = case_from_artifact(info.artifact)
        data = pair_data(sc, n=int(inputs.get("n_examples") or 100), seed=int(inputs.get("seed") or 0),
                         sampled=bool(inputs.get("sampled")))
        res = evaluate_faithfulness(sc, data, edge_score_vector(info.artifact.graph, doc))
    except CbenchError:
        return None, None
    finite = lambda x: float(x) if math.isfinite(x) else None
    return finite(res.cpr), finite(res.cmd)


def gather(results_dir: Path, out: Path, echo: Callable[[str], None] = print):
    """(entries, cases, infos, bench document): the bench's methods and the submissions kept in ``out``."""
    from cbench.schemas import read_json
    from cbench.scoring.ground_truth import check_edge_scores

    bench = read_bench(results_dir)
    res, inputs = bench["results"], bench["inputs"]
    methods = list(inputs.get("methods") or [])
    auroc = res.get("auroc") or {}
    faith = res.get("faithfulness") or {}
    cases = sorted(auroc, key=_case_key)
    infos: dict[str, CaseInfo] = {}
    for case in cases:
        try:
            infos[case] = _load_case(case, (inputs.get("models") or {}).get(case))
        except CbenchError as exc:
            echo(f"case {case}: left out of the per-case pages ({exc})")
    entries = []
    for m in methods:
        kind = "oracle" if m in ORACLE_METHODS else "random" if m in RANDOM_METHODS else "method"
        e = Entry(m, kind)
        for case in cases:
            e.auroc[case] = auroc[case].get(m)
            e.auroc_mib[case] = (res.get("auroc_mib") or {}).get(case, {}).get(m)
            e.node_auroc[case] = (res.get("node_auroc") or {}).get(case, {}).get(m)
            e.runtime[case] = (res.get("method_runtime_s") or {}).get(case, {}).get(m)
            f = (faith.get(case) or {}).get(m) or {}
            e.cpr[case], e.cmd[case] = f.get("cpr"), f.get("cmd")
            p = Path(results_dir) / "scores" / case / f"{m}.json"
            if case in infos and p.is_file() and e.auroc[case] is not None:
                e.scores[case] = read_json(p)
        entries.append(e)
    sub_dir = out / "submissions"
    for d in sorted(p for p in sub_dir.glob("*") if p.is_dir()) if sub_dir.is_dir() else []:
        e = Entry(d.name, "submission")
        for f in sorted(d.glob("*.json")):
            case = f.stem
            if case not in infos:
                echo(f"submission {d.name}: case {case} is not in the bench results; left out")
                continue
            try:
                doc = read_json(f)
                check_edge_scores(doc, infos[case].artifact.graph, case=case, source=str(f))
                r = score_doc(infos[case], doc, _no_signal(bench, case))
            except CbenchError as exc:
                echo(f"submission {d.name}, case {case}: left out ({exc})")
                continue
            named = doc.get("entry_name") or (doc.get("method") or {}).get("name")
            if isinstance(named, str) and named and slug(named) == d.name:
                e.name = named  # the name as submitted (the directory holds its slug)
            e.auroc[case] = r.edge_auroc
            e.auroc_mib[case] = mib_auroc_of(infos[case], doc)
            e.node_auroc[case] = None if math.isnan(r.node_auroc) else r.node_auroc
            e.runtime[case] = doc.get("runtime_s")
            e.cpr[case], e.cmd[case] = faithfulness_of(infos[case], doc, bench)
            e.scores[case] = doc
        if e.auroc:
            entries.append(e)
    for tier, row in auroc_by_tier(entries, bench).items():
        for e in entries:
            if e.name in row:
                e.by_tier[tier] = row[e.name]
    return entries, cases, infos, bench


def split_by_coverage(entries: list[Entry], cases: list[str]) -> tuple[list[Entry], list[Partial]]:
    """(entries over every case ranked by mean edge AUROC, the others): an entry over fewer cases
    is ranked only against the entries that have a score on each of its cases, by the mean over
    those cases, so a one-case submission is never ranked beside the full ones."""
    full = [e for e in entries if set(e.covered) == set(cases)]
    full.sort(key=lambda e: (-(e.mean if e.mean is not None else -1), e.name))
    partial = []
    for e in entries:
        if e in full or not e.covered:
            continue
        own = e.mean_over(e.covered)
        peers = [o for o in entries if set(e.covered) <= set(o.covered)]
        better = sum(1 for o in peers if o is not e and (o.mean_over(e.covered) or -1) > (own or -1))
        partial.append(Partial(e, own, better + 1, len(peers)))
    partial.sort(key=lambda p: (-len(p.entry.covered), p.rank, p.entry.name))
    return full, partial


def comparisons(entries: list[Entry]) -> dict:
    """{against: {entry: {"p": Mann-Whitney U p-value, "a12": Vargha-Delaney A12 of entry vs against}}}."""
    from cbench.scoring.statistics import mann_whitney

    out: dict = {}
    for b in entries:
        row = out.setdefault(b.name, {})
        for a in entries:
            if a is b or not a.values() or not b.values():
                continue
            r = mann_whitney(a.values(), b.values())
            row[a.name] = {"p": r.p_value, "a12": r.a12}
    return out


def fmt(x, d=3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def fmt_p(x) -> str:
    return "–" if x is None else (f"{x:.4f}" if x >= 1e-3 else f"{x:.1e}")
