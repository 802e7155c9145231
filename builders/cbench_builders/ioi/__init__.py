"""IOI: the ``cbench/ioi`` dataset and the IOI model trained with SIIT against its causal model.

Owns: the word-level vocabulary (``vocab``), the dataset generator in MIB's row format with its
eight counterfactual types (``dataset``), the model's architecture, objective, training data
and checkpoints (``model``), its artifact and release gates (``artifact``), and the command
``cbench build ioi-model`` (``build``). ``cbench build datasets`` writes the dataset through
``dataset``.

May import: ``cbench_builders.siit`` (the trainer), ``cbench_builders.release`` and the client.
"""

from cbench import moved_attributes as _moved

# ``cbench_builders.ioi`` was the dataset module in 0.1: its names resolve here, with a
# DeprecationWarning, until 0.2.
_OLD_NAMES = ("DEFAULT_SEED", "DEFAULT_SIZES", "COUNTERFACTUAL_TYPES", "_ALIASES", "_TRANSFORMS", "DESCRIPTIONS",
              "VOCAB_FILE", "resolve_counterfactuals", "IOISample", "_render", "_choices", "_counterfactual", "_draw",
              "make_row", "generate_split", "arrow_schema", "IOIBuild", "data_file", "build_ioi", "_write_text",
              "correct_answer")
__getattr__ = _moved(__name__, {name: "cbench_builders.ioi.dataset" for name in _OLD_NAMES}, warn=True)
