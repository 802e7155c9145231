"""The counterfactual rows localization reads (``cbench/counterfactuals``, from the hub or a local
snapshot directory), read through :mod:`cbench.files.readers`: a damaged parquet file, a missing
column or a token id outside the model's vocabulary is one line naming the file, before a model
is loaded. Imports neither torch nor the model code, so ``cbench localize --dataset DIR`` checks
DIR first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cbench.errors import UsageError

#: the columns of a cbench/counterfactuals split that localization reads
COUNTERFACTUAL_COLUMNS = ("base_ids", "source_ids", "base_label", "interchange_labels", "high_level_nodes")


def read_rows(case: str, split: str, dataset_dir: str | Path | None = None, revision: str | None = None,
              n: int | None = None) -> tuple[list[dict], str]:
    """The first ``n`` counterfactual rows of ``case-<id>``'s ``split``: from a local snapshot
    directory of ``cbench/counterfactuals`` when given, else from the hub. Returns (rows, where)."""
    config = f"case-{case}"
    if dataset_dir is not None:
        from cbench.files.readers import read_parquet_rows

        root = Path(dataset_dir)
        files = sorted((root / config).glob(f"{split}-*.parquet"))
        if not files:
            raise UsageError(f"{root}: no {config}/{split}-*.parquet (is it a cbench/counterfactuals snapshot?)")
        rows: list[dict] = []
        for f in files:
            if n is not None and len(rows) >= n:
                break
            got = read_parquet_rows(f, COUNTERFACTUAL_COLUMNS, what="a split of cbench/counterfactuals",
                                    error=UsageError)
            rows.extend(got[:None if n is None else n - len(rows)])
        return rows, str(root)
    from cbench.hub.loading import load_dataset

    ds = load_dataset("counterfactuals", config, revision=revision, split=split)
    if n is not None:
        ds = ds.select(range(min(n, len(ds))))
    return list(ds), "cbench/counterfactuals" + (f"@{revision}" if revision else "")


def check_rows(rows: Sequence[Mapping], meta: Mapping, where: str) -> None:
    """UsageError naming ``where`` unless every row's inputs are lists of token ids of the model
    (``meta.json``'s ``input_tokens``) and its interchange labels one list per high-level node."""
    n_vocab = len(meta.get("input_tokens") or ())
    for i, r in enumerate(rows):
        for key in ("base_ids", "source_ids"):
            ids = r.get(key)
            if not isinstance(ids, list) or not ids:
                raise UsageError(f"{where}: counterfactual row {i}: {key} is not a list of token ids")
            bad = [x for x in ids if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n_vocab]
            if bad:
                raise UsageError(f"{where}: counterfactual row {i}: token id {bad[0]!r} in {key} is not in the "
                                 f"model's vocabulary (ids 0 to {n_vocab - 1})")
        nodes, labels = r.get("high_level_nodes") or [], r.get("interchange_labels")
        if not isinstance(labels, list) or len(labels) != len(nodes):
            raise UsageError(f"{where}: counterfactual row {i}: {0 if not isinstance(labels, list) else len(labels)} "
                             f"interchange labels for {len(nodes)} high-level nodes")


def check_local_dataset(case: str, meta: Mapping, dataset_dir: str | Path, n_train: int, n_test: int) -> None:
    """Read and check the train and test rows ``cbench localize`` will use from ``dataset_dir``."""
    for split, n in (("train", n_train), ("test", n_test)):
        rows, _ = read_rows(case, split, dataset_dir, None, n)
        check_rows(rows, meta, str(Path(dataset_dir) / f"case-{case}" / split))
