"""What cbench is as a package: its version, the default organisation on the hub, and the shims
that keep import paths of earlier versions working (:class:`MovedModuleFinder`,
:func:`moved_attributes`).

The bottom of the import graph beside :mod:`cbench.errors`: every package may import it; it
imports nothing of cbench.
"""

from __future__ import annotations

__version__ = "0.1.0"

DEFAULT_ORG = "cbench"


# ---------------------------------------------------------------------------- old import paths
# Until 0.2 the client was one flat folder. Those module paths keep working for one minor
# version (0.1.x) with a DeprecationWarning: ``import cbench.pull`` gives the module that now
# lives at ``cbench.hub.pull`` (the same object, so patching either patches both).
MOVED_MODULES = {
    "cbench.hub_api": "cbench.hub.api", "cbench.hub_server": "cbench.hub.server",
    "cbench.cache": "cbench.hub.cache", "cbench.cache_verify": "cbench.hub.cache_verify",
    "cbench.pull": "cbench.hub.pull", "cbench.loading": "cbench.hub.loading",
    "cbench.transformer_lens_adapter": "cbench.artifacts.transformer_lens_adapter",
    "cbench.tokenizer": "cbench.artifacts.tokenizer", "cbench.legacy_pickle": "cbench.artifacts.legacy_pickle",
    "cbench.interpbench_import": "cbench.artifacts.interpbench_import",
    "cbench.mib_format": "cbench.artifacts.mib_format", "cbench.safe_io": "cbench.files.safe_io",
    "cbench.task_data": "cbench.tasks.data", "cbench.ioi_data": "cbench.tasks.ioi_data",
    "cbench.ioi_high_level": "cbench.tasks.ioi_high_level", "cbench.interchange": "cbench.tasks.interchange",
    "cbench.labels": "cbench.tasks.labels", "cbench.metrics": "cbench.tasks.metrics",
    "cbench.circuits": "cbench.graph.circuits", "cbench.ablation": "cbench.scoring.ablation",
    "cbench.allocator": "cbench.runtime.allocator", "cbench.pyvene_adapter": "cbench.localization.pyvene_adapter",
    "cbench.executor": "cbench.scoring.executor", "cbench.validation": "cbench.schemas",
}


def _deprecated(old: str, new: str) -> None:
    import warnings

    warnings.warn(f"{old} moved to {new} in cbench 0.1; the old path goes away in 0.2",
                  DeprecationWarning, stacklevel=3)


class MovedModuleFinder:
    """A meta-path finder that answers an old module path with the module at its new path
    (``moved``: old dotted path -> new dotted path), warning once per import."""

    def __init__(self, moved: dict[str, str]):
        self.moved = moved

    def find_spec(self, fullname, path=None, target=None):
        new = self.moved.get(fullname)
        if new is None:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new))


class _MovedModuleLoader:
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        import importlib

        _deprecated(spec.name, self.new)
        module = importlib.import_module(self.new)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.real_spec  # the import system set the old name's spec; restore it


def moved_attributes(package: str, names: dict[str, str], warn: bool = False):
    """A module ``__getattr__`` for ``package`` that imports ``names[attr]`` (a module) on first
    use and returns its ``attr``: keeps a subpackage's ``__init__`` free of eager imports."""

    def __getattr__(attr: str):
        module = names.get(attr)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        import importlib

        if warn:
            _deprecated(f"{package}.{attr}", f"{module}.{attr}")
        return getattr(importlib.import_module(module), attr)

    return __getattr__
