"""SIIT: train a low-level transformer to implement a high-level model's circuit, strictly.

Owns: a run's hyperparameters (``config``), the low-level architecture and the high- to
low-level correspondence (``architecture``), the inputs (``data``), interchange of whole
components of a TransformerLens model (``interchange``), targets and losses (``losses``), the
interventions of each step (``interventions``), the validation metrics (``evaluation``), the
training loop (``trainer``), and the commands ``cbench build siit`` (``build``) and
``cbench build siit-report`` (``report``).

May import: ``cbench_builders.cases``, ``cbench_builders.release`` and the client. Never
``tracr/``, ``datasets/`` or ``ioi/``: a Tracr model is read as an artifact, and the IOI model
plugs its own high-level model and objective into the trainer.
"""

from cbench import moved_attributes as _moved

# ``cbench_builders.siit`` was one module in 0.1: its names resolve here, with a
# DeprecationWarning, until 0.2.
_OLD_NAMES = {
    "cbench_builders.siit.config": ("ALGORITHMS", "EDGE_SAMPLINGS", "TrainingConfig"),
    "cbench_builders.siit.architecture": ("low_level_config", "INTERPBENCH_RATIO", "INTERPBENCH_RESIDUAL_COMPRESSED",
                                          "ARCHITECTURES", "interpbench_low_level_config", "low_level_for_case",
                                          "make_correspondence", "map_circuit_edges", "all_components"),
    "cbench_builders.siit.interventions": ("invariant_edges",),
    "cbench_builders.siit.data": ("task_inputs", "InputSet", "make_input_set"),
    "cbench_builders.siit.trainer": ("make_optimizer", "hardware_description", "TrainingResult", "SIITTrainer"),
    "cbench_builders.siit.interchange": ("ComponentForward", "components"),
    "cbench.tasks.labels": ("NO_CLASS", "high_level_classes"),
}
__getattr__ = _moved(__name__, {name: module for module, names in _OLD_NAMES.items() for name in names}, warn=True)
