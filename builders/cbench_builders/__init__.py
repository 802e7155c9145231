"""cbench builders: turn case specifications in model_zoo/ into released artifacts.

Heavy dependencies (jax, haiku, tracr) live only here; the client never imports this package.

One subpackage per stage, imports running one way (top to bottom; ``cli.py`` is the glue that
plugs each stage's command into ``cbench build``)::

    datasets/  find/     the dataset repositories; the FIND suite
    ioi/                 the IOI dataset generator and the IOI model (trained with siit/)
    siit/  tracr/        SIIT training; Tracr compilation
    cases/  release/     the case specifications; cards, parquet and the zoo release

Module paths of 0.1's flat layout (``cbench_builders.siit_build``, ...) keep importing, with a
DeprecationWarning, until 0.2 (:data:`MOVED_MODULES`; the names of the old modules
``cbench_builders.siit``, ``.ioi`` and ``.release``, now packages, resolve in those packages).
"""

from cbench import MovedModuleFinder as _MovedModuleFinder

#: old module path -> new module path (issue 32: packages by stage)
MOVED_MODULES = {
    "cbench_builders.tracr_build": "cbench_builders.tracr.build",
    "cbench_builders.tracr_circuit": "cbench_builders.tracr.circuit",
    "cbench_builders.tracr_compile": "cbench_builders.tracr.compile",
    "cbench_builders.tracr_convert": "cbench_builders.tracr.convert",
    "cbench_builders.tracr_exactness": "cbench_builders.tracr.exactness",
    "cbench_builders.tracr_programs": "cbench_builders.tracr.programs",
    "cbench_builders.siit_build": "cbench_builders.siit.build",
    "cbench_builders.siit_report": "cbench_builders.siit.report",
    "cbench_builders.interchange": "cbench_builders.siit.interchange",
    "cbench_builders.ioi_build": "cbench_builders.ioi.build",
    "cbench_builders.ioi_model": "cbench_builders.ioi.model",
    "cbench_builders.ioi_release": "cbench_builders.ioi.artifact",
    "cbench_builders.ioi_vocab": "cbench_builders.ioi.vocab",
    "cbench_builders.datasets_build": "cbench_builders.datasets.build",
    "cbench_builders.counterfactuals": "cbench_builders.datasets.counterfactuals",
    "cbench_builders.circuits_dataset": "cbench_builders.datasets.circuits",
    "cbench_builders.high_level": "cbench_builders.datasets.high_level",
    "cbench_builders.find_suite": "cbench_builders.find.suite",
    "cbench_builders.cards": "cbench_builders.release.cards",
    "cbench_builders.parquet_io": "cbench_builders.release.parquet",
    "cbench_builders.case_specs": "cbench_builders.cases.specs",
}

import sys as _sys  # noqa: E402

if not any(isinstance(f, _MovedModuleFinder) and f.moved is MOVED_MODULES for f in _sys.meta_path):
    _sys.meta_path.append(_MovedModuleFinder(MOVED_MODULES))
