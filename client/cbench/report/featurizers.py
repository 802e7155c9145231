"""The featurizer leaderboard of the causal-variable track, for ``cbench report --variables DIR``.

Read from the track's results file (``DIR/results.json`` of ``cbench bench --track
causal-variables --out DIR``, kind ``causal-variables``), never recomputed: the board is the
file's ``results.leaderboard`` (featurizer x variable kind: mean IIA at the true location, share
of variables whose best location found is a true one), the cells its ``results.rows`` (every
featurizer on every variable: IIA at the true location, the best location found, whether it is a
true one). The report's page ``featurizers.html`` shows both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cbench.errors import UsageError

TRACK_KIND = "causal-variables"


@dataclass(frozen=True)
class BoardRow:
    """One featurizer on one kind of variable (the file's ``results.leaderboard``)."""

    variable_kind: str
    featurizer: str
    variables: int
    mean_iia_true: float | None
    best_is_true: float | None  # share of the variables; None where no location search ran
    mean_iia: float | None  # MIB's mean over counterfactual datasets and locations
    mean_best_iia: float | None


@dataclass(frozen=True)
class Cell:
    """One featurizer on one variable (a row of the file's ``results.rows``)."""

    model: str
    variable: str
    kind: str
    separates: bool
    true_location: str
    featurizer: str
    iia_true: float | None
    best_location: str | None
    best_iia: float | None
    best_is_true: bool | None


@dataclass(frozen=True)
class FeaturizerBoard:
    source: str  # the results file
    featurizers: tuple[str, ...]
    kinds: tuple[str, ...]
    board: tuple[BoardRow, ...]
    cells: tuple[Cell, ...]
    iia_unit: str
    locations: str  # "all": every location searched; "true": only the true ones
    sizes: dict
    include_trivial: bool

    def matrix(self) -> dict[str, dict[str, BoardRow]]:
        """featurizer -> variable kind -> its board row."""
        out: dict[str, dict[str, BoardRow]] = {f: {} for f in self.featurizers}
        for r in self.board:
            out.setdefault(r.featurizer, {})[r.variable_kind] = r
        return out


def _num(x, where: str) -> float | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise UsageError(f"{where}: {x!r} is not a number")
    return float(x)


def read_track(path: str | Path) -> FeaturizerBoard:
    """The board of a causal-variable track's results (its directory or its ``results.json``)."""
    from cbench.schemas import check, read_json

    p = Path(path)
    file = p / "results.json" if p.is_dir() else p
    if not file.is_file():
        raise UsageError(f"--variables {path}: no results.json; run "
                         f"`cbench bench --track causal-variables --out {path}` first")
    doc = read_json(file)
    check(doc, "results", source=str(file))
    if doc.get("kind") != TRACK_KIND:
        raise UsageError(f"{file}: a {doc.get('kind')!r} results document, not the results of "
                         "`cbench bench --track causal-variables`")
    res, inputs = doc.get("results") or {}, doc.get("inputs") or {}
    try:
        board = tuple(BoardRow(str(b["variable_kind"]), str(b["featurizer"]), int(b["variables"]),
                               _num(b.get("mean_iia_true"), str(file)), _num(b.get("best_is_true"), str(file)),
                               _num(b.get("mean_iia"), str(file)), _num(b.get("mean_best_iia"), str(file)))
                      for b in res.get("leaderboard") or [])
        cells = []
        for r in res.get("rows") or []:
            m = (r.get("scores") or {}).get("mib") or {}
            cells.append(Cell(str(r["model"]), str(r["variable"]), str(r.get("variable_kind") or r["model_kind"]),
                              r.get("separates") is not False, str(r["aligned_location"]), str(r["featurizer"]),
                              _num(m.get("iia_true"), str(file)),
                              None if m.get("best_location") is None else str(m["best_location"]),
                              _num(m.get("best_iia"), str(file)),
                              None if m.get("best_is_true") is None else bool(m["best_is_true"])))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{file}: not the results of the causal-variable track ({type(e).__name__}: {e})") from None
    feats = list(inputs.get("featurizers") or [])
    for x in [*board, *cells]:
        if x.featurizer not in feats:
            feats.append(x.featurizer)
    kinds = sorted({b.variable_kind for b in board} | {c.kind for c in cells})
    return FeaturizerBoard(str(file), tuple(feats), tuple(kinds), board, tuple(cells),
                           str(inputs.get("iia_unit") or "example"), str(inputs.get("locations") or "all"),
                           dict(inputs.get("sizes") or {}), bool(inputs.get("include_trivial")))
