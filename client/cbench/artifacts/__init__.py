"""Model artifacts: the files of a released model and everything that reads or writes them.

Owns: the artifact directory (``model``: config, safetensors weights, meta, circuit,
correspondence, manifest hashes), the TransformerLens adapter (the one place that touches
TransformerLens), tokenizers, MIB/EAP-IG graph files (``mib_format``), and the readers of
outside formats: legacy InterpBench pickles through a restricted unpickler (``legacy_pickle``)
and their import as artifacts (``interpbench_import``).

May import: ``cbench.schemas``, ``cbench.graph``, ``cbench.files``, ``cbench.errors``. Never the
hub: an artifact is a directory on disk, wherever it came from.
"""

from cbench.about import moved_attributes as _moved

# The artifacts' public surface (what ``cbench.artifacts`` was as one module), imported on first use.
_SURFACE = {
    "cbench.artifacts.model": ("MODEL_FORMAT", "CONFIG_FILE", "WEIGHTS_FILE", "META_FILE", "CIRCUIT_FILE",
                               "CORRESPONDENCE_FILE", "README_FILE", "RESERVED_NAMES", "check_output_convention",
                               "ModelArtifact", "read_model_artifact", "verify_artifact", "write_model_artifact",
                               "STALE_TEMPORARY_S"),
    "cbench.artifacts.serialization": ("sha256_bytes", "sha256_file", "dumps_json", "write_json", "artifact_files",
                                       "read_safetensors_header", "_safetensors_bytes"),
}
__getattr__ = _moved(__name__, {name: module for module, names in _SURFACE.items() for name in names})
