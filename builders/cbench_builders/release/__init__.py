"""Release: the form every built artifact is released in, and releasing it into the zoo.

Owns: model and dataset cards rendered from the templates in ``cards/`` (``cards``),
deterministic parquet files (``parquet``), and the command ``cbench build release`` (``zoo``):
copying built artifacts into ``model_zoo/releases`` and writing its index.

The bottom of the builders, beside ``cases/``: every stage writes its cards and parquet files
through it. May import: the client only.
"""

from cbench import moved_attributes as _moved

# ``cbench_builders.release`` was one module in 0.1: its names resolve here, with a
# DeprecationWarning, until 0.2.
_OLD_NAMES = ("ORG", "_sha256", "_tree_files", "collect", "release", "_record_release_date", "write_index",
              "_KIND_ORDER", "_one_entry_per_case", "_dataset_configs", "build_release_cmd")
__getattr__ = _moved(__name__, {name: "cbench_builders.release.zoo" for name in _OLD_NAMES}, warn=True)
