"""``cbench build ...``: the builders' commands, plugged into the client's CLI by entry point.

Each subcommand lives in the module named below so builders of different artifacts do not
share a file.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

SUBCOMMANDS = {
    "tracr": "cbench_builders.tracr.build:build_tracr_cmd",
    "datasets": "cbench_builders.datasets.build:build_datasets_cmd",
    "siit": "cbench_builders.siit.build:build_siit_cmd",
    "siit-report": "cbench_builders.siit.report:siit_report_cmd",
    "release": "cbench_builders.release.zoo:build_release_cmd",
    "re-release": "cbench_builders.release.rerelease:rerelease_cmd",
    "schemas": "cbench_builders.release.schemas:build_schemas_cmd",
    "find": "cbench_builders.find.suite:build_find_cmd",
    "ioi-model": "cbench_builders.ioi.build:build_ioi_cmd",
    "lm": "cbench_builders.lm.repository:build_lm_cmd",
    "stress": "cbench_builders.stress.build:build_stress_cmd",
    "variables": "cbench_builders.variables.build:build_variables_cmd",
    "stress-dataset": "cbench_builders.stress.dataset:build_stress_dataset_cmd",
    "stress-siit": "cbench_builders.stress.siit:build_stress_siit_cmd",
}


class _LazyBuild(click.Group):
    def list_commands(self, ctx):
        return sorted(n for n, t in SUBCOMMANDS.items() if importlib.util.find_spec(t.split(":")[0]))

    def get_command(self, ctx, name):
        target = SUBCOMMANDS.get(name)
        if not target or not importlib.util.find_spec(target.split(":")[0]):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyBuild)
def build():
    """Build artifacts from the case specifications in model_zoo/."""
