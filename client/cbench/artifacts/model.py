"""Model artifacts: a directory with a model's config, weights, metadata and ground truth.

Layout (DESIGN.md, "Artifacts")::

    config.json          HookedTransformerConfig as plain JSON (dtype as a string)
    model.safetensors    the weights; header metadata {"format": "pt",
                         "cbench_format": "cbench-model/v1", "case": ..., "model_kind": ...}
    meta.json            cbench/model-meta/v1; meta["files"] = sha256 of every other file
    circuit.json         cbench/circuit/v1 (optional)
    correspondence.json  cbench/correspondence/v1 (optional; SIIT models)
    README.md            the model card (optional)
    tracr/ ...           sub-artifacts, each a full artifact directory (optional)

Guarantees:

* **Deterministic bytes.** JSON is written with sorted keys, indent 2 and a trailing newline;
  model.safetensors is serialised here (not by the safetensors library, whose header metadata
  comes out in a random order per process): tensors sorted by name, contiguous, header JSON
  with sorted keys. Writing the same model twice gives byte-identical files.
* **Atomic.** :func:`write_model_artifact` builds the directory beside the target under a
  temporary name, verifies it by reading it back, and renames it into place; a failure leaves
  nothing half-written, and an existing artifact is replaced only with ``overwrite=True``
  (and kept if the replacement fails).
* **Verified reads.** :func:`read_model_artifact` (``verify=True``) checks every file listed in
  meta.json against its sha256 (:class:`~cbench.errors.HashMismatchError`), refuses unlisted
  files (dotfiles such as ``.gitattributes`` aside), validates every JSON document against its
  schema (:class:`~cbench.errors.ArtifactSchemaError`), checks the circuit against the model's
  graph and config.json against meta.json (:func:`check_output_convention`).

Reading metadata needs neither torch nor TransformerLens; :meth:`ModelArtifact.load_model` and
:meth:`ModelArtifact.state_dict` import them on demand (through
:mod:`cbench.artifacts.transformer_lens_adapter`).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Mapping

from cbench.artifacts.serialization import (
    _check_doc,
    _is_hidden,
    _read_json,
    _safetensors_bytes,
    artifact_files,
    dumps_json,
    read_safetensors_header,
    sha256_bytes,
    sha256_file,
)
from cbench.errors import (
    ArtifactError,
    ArtifactSchemaError,
    GraphError,
    HashMismatchError,
)

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from cbench.graph.graph import Graph

MODEL_FORMAT = "cbench-model/v1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
META_FILE = "meta.json"
CIRCUIT_FILE = "circuit.json"
CORRESPONDENCE_FILE = "correspondence.json"
README_FILE = "README.md"
RESERVED_NAMES = frozenset({CONFIG_FILE, WEIGHTS_FILE, META_FILE, CIRCUIT_FILE, CORRESPONDENCE_FILE, README_FILE,
                            "bridge"})

__all__ = [
    "MODEL_FORMAT",
    "ModelArtifact",
    "write_model_artifact",
    "read_model_artifact",
    "verify_artifact",
    "check_output_convention",
]




















# ---------------------------------------------------------------------------- safetensors






# ---------------------------------------------------------------------------- conventions
def check_output_convention(config: Mapping[str, Any], meta: Mapping[str, Any], where: str = "artifact") -> None:
    """Raise ArtifactError unless config.json and meta.json agree on the model's inputs and outputs.

    * ``d_vocab == len(input_tokens)`` (BOS and PAD included);
    * numerical tasks: ``d_vocab_out == 1`` (one value per position), ``output_classes`` null;
    * categorical tasks: ``d_vocab_out == len(output_classes)`` (logits over the classes);
    * ``min_seq_len <= max_seq_len <= n_ctx`` (lengths count BOS);
    * ``causal`` matches ``attention_dir``.
    """
    for key in ("n_layers", "n_heads", "d_model", "d_head", "n_ctx", "d_vocab"):
        v = config.get(key)
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise ArtifactError(f"{where}: config.json {key} must be a whole number >= 1 (got {v!r})")
    d_vocab = config["d_vocab"]
    d_vocab_out = config.get("d_vocab_out", -1)
    if d_vocab_out in (-1, None):
        d_vocab_out = d_vocab
    tokens = meta.get("input_tokens")
    if isinstance(tokens, list) and d_vocab != len(tokens):
        raise ArtifactError(f"{where}: config.json has d_vocab {d_vocab} but meta.json lists {len(tokens)} input_tokens")
    task = meta.get("task_type")
    classes = meta.get("output_classes")
    if task == "numerical" and d_vocab_out != 1:
        raise ArtifactError(f"{where}: a numerical task's model must have d_vocab_out 1 (config.json has {d_vocab_out})")
    if task == "categorical" and isinstance(classes, list) and d_vocab_out != len(classes):
        raise ArtifactError(
            f"{where}: config.json has d_vocab_out {d_vocab_out} but meta.json lists {len(classes)} output_classes"
        )
    n_ctx = config["n_ctx"]
    lo, hi = meta.get("min_seq_len"), meta.get("max_seq_len")
    if isinstance(hi, int) and hi > n_ctx:
        raise ArtifactError(f"{where}: meta.json max_seq_len {hi} exceeds config.json n_ctx {n_ctx}")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise ArtifactError(f"{where}: meta.json min_seq_len {lo} exceeds max_seq_len {hi}")
    causal = meta.get("causal")
    attn_dir = config.get("attention_dir", "causal")
    if isinstance(causal, bool) and causal != (attn_dir == "causal"):
        raise ArtifactError(f"{where}: meta.json says causal={causal} but config.json has attention_dir {attn_dir!r}")


def _check_circuit(circuit: Mapping[str, Any], config: Mapping[str, Any], meta: Mapping[str, Any], where: str) -> None:
    from cbench.graph.graph import Graph
    from cbench.schemas import check_against_graph

    try:
        graph = Graph.from_config(config)
    except GraphError as e:
        raise ArtifactError(f"{where}: config.json: {e}") from None
    violations = check_against_graph(circuit, graph, case=meta.get("case"), d_model=config.get("d_model"),
                                     kind="circuit")
    if violations:
        raise ArtifactSchemaError(f"{where}/{CIRCUIT_FILE} does not fit the model's graph "
                                  f"({len(violations)} problem{'s' if len(violations) != 1 else ''})",
                                  [str(v) for v in violations])
    if circuit.get("model_kind") != meta.get("model_kind"):
        raise ArtifactError(f"{where}: circuit.json is for model_kind {circuit.get('model_kind')!r} "
                            f"but meta.json says {meta.get('model_kind')!r}")


def _check_correspondence(corr: Mapping[str, Any], config: Mapping[str, Any], meta: Mapping[str, Any],
                          where: str) -> None:
    if str(corr.get("case")) != str(meta.get("case")):
        raise ArtifactError(f"{where}: correspondence.json is for case {corr.get('case')!r} "
                            f"but meta.json says {meta.get('case')!r}")
    shape = corr.get("graph") or {}
    model_shape = {"n_layers": config.get("n_layers"), "n_heads": config.get("n_heads"),
                   "has_mlp": not bool(config.get("attn_only", False)),
                   "parallel_attn_mlp": bool(config.get("parallel_attn_mlp", False))}
    for key, value in model_shape.items():
        if key in shape and shape[key] != value:
            raise ArtifactError(f"{where}: correspondence.json graph.{key} is {shape[key]!r} "
                                f"but the model (config.json) has {value!r}")


def _check_weights_header(path: Path, meta: Mapping[str, Any], where: str) -> None:
    md = read_safetensors_header(path).get("__metadata__") or {}
    if md.get("cbench_format") != MODEL_FORMAT:
        raise ArtifactError(f"{where}: model.safetensors is not a {MODEL_FORMAT} file "
                            f"(header cbench_format {md.get('cbench_format')!r})")
    for key in ("case", "model_kind"):
        if str(md.get(key)) != str(meta.get(key)):
            raise ArtifactError(f"{where}: model.safetensors header says {key} {md.get(key)!r} "
                                f"but meta.json says {meta.get(key)!r}")


# ---------------------------------------------------------------------------- the artifact
@dataclass(frozen=True)
class ModelArtifact:
    """A model artifact directory as read (and, with ``verify``, checked) from disk."""

    path: Path
    config: dict
    meta: dict
    circuit: dict | None = None
    correspondence: dict | None = None
    verified: bool = field(default=False, compare=False)

    @property
    def case(self) -> str:
        return str(self.meta["case"])

    @property
    def model_kind(self) -> str:
        return str(self.meta["model_kind"])

    @property
    def task_type(self) -> str:
        return str(self.meta["task_type"])

    @cached_property
    def graph(self) -> "Graph":
        """The canonical graph of this model (from config.json)."""
        from cbench.graph.graph import Graph

        return Graph.from_config(self.config)

    @cached_property
    def tracr(self) -> "ModelArtifact | None":
        """The high-level model (``tracr/`` sub-artifact) or None."""
        sub = self.path / "tracr"
        if not (sub / META_FILE).is_file():
            return None
        return read_model_artifact(sub, verify=self.verified)

    @property
    def readme(self) -> str | None:
        p = self.path / README_FILE
        return p.read_text(encoding="utf-8") if p.is_file() else None

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    def weights_metadata(self) -> dict[str, str]:
        """The header metadata of model.safetensors."""
        return dict(read_safetensors_header(self.weights_path).get("__metadata__") or {})

    def state_dict(self) -> dict[str, "torch.Tensor"]:
        """The weights as CPU tensors."""
        from safetensors import SafetensorError
        from safetensors.torch import load as st_load

        try:
            data = self.weights_path.read_bytes()
        except OSError as e:
            raise ArtifactError(f"{self.weights_path}: cannot read it ({e.strerror or e})") from None
        if self.verified:
            expected = self.meta.get("files", {}).get(WEIGHTS_FILE)
            actual = sha256_bytes(data)
            if expected and actual != expected:
                raise HashMismatchError(f"{self.weights_path}: sha256 {actual[:12]}... does not match "
                                        f"meta.json's {expected[:12]}... (changed since it was verified)")
        try:
            return st_load(data)
        except (SafetensorError, ValueError, RuntimeError) as e:
            raise ArtifactError(f"{self.weights_path}: not a readable safetensors file ({e})") from None

    def tokenizer(self):
        """The model's word-level :class:`tokenizers.Tokenizer`: ``tokenizer.json`` when the
        artifact has one, else built from meta.json (artifacts released before it existed)."""
        from cbench.artifacts.tokenizer import read_tokenizer

        return read_tokenizer(self.path, self.meta)

    def load_model(self, tokenizer: bool = True):
        """A CPU HookedTransformer in eval mode with use_attn_result, use_split_qkv_input and
        use_hook_mlp_in on (see :func:`cbench.artifacts.transformer_lens_adapter.build_model`), with the
        model's tokenizer attached (``model.to_tokens("x a b")`` prepends BOS)."""
        from cbench.artifacts.transformer_lens_adapter import (
            attach_tokenizer,
            build_model,
        )

        weights = self.state_dict()
        try:
            model = build_model(self.config, weights)
        except HashMismatchError:
            raise
        except ArtifactError as e:
            raise ArtifactError(f"{self.path}: {e}") from None
        if tokenizer:
            from cbench.artifacts.tokenizer import token_string

            pad = self.meta.get("pad_token")
            attach_tokenizer(model, self.tokenizer(), bos=token_string(self.meta.get("bos_token", "BOS")),
                             pad=None if pad is None else token_string(pad), name=f"cbench/{self.path.name}")
        return model


def _require_dir(path: Path) -> None:
    if not path.exists():
        raise ArtifactError(f"no model artifact at {path} (no such directory)")
    if not path.is_dir():
        raise ArtifactError(f"no model artifact at {path} (not a directory)")


def _verify_files(root: Path, meta: Mapping[str, Any]) -> None:
    listed: Mapping[str, str] = meta.get("files") or {}
    present = set(artifact_files(root))
    for rel in sorted(listed):
        p = root / rel
        if rel not in present:
            raise ArtifactError(f"{root}: {rel} is listed in meta.json but missing")
        actual = sha256_file(p)
        if actual != listed[rel]:
            raise HashMismatchError(f"{root}: {rel} does not match its sha256 in meta.json "
                                    f"(expected {listed[rel][:12]}..., got {actual[:12]}...)")
    unlisted = sorted(present - set(listed) - {META_FILE})
    if unlisted:
        more = f" and {len(unlisted) - 3} more" if len(unlisted) > 3 else ""
        raise ArtifactError(f"{root}: file{'s' if len(unlisted) > 1 else ''} not listed in meta.json: "
                            f"{', '.join(unlisted[:3])}{more}")


def _names_model_type(config: Path) -> bool:
    """Whether ``config`` is a ``transformers`` config.json (it names a ``model_type``)."""
    try:
        doc = json.loads(config.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("model_type"), str)


def read_model_artifact(path: str | os.PathLike, verify: bool = True) -> ModelArtifact:
    """Read a model artifact directory.

    Always: the directory and config.json, model.safetensors and meta.json exist; meta.json
    (and circuit.json / correspondence.json when present) parse as JSON. With ``verify`` (the
    default): every file listed in meta.json exists and matches its sha256, no unlisted files,
    every JSON document satisfies its schema, the circuit fits the model's graph, config.json
    and meta.json agree (:func:`check_output_convention`), model.safetensors' header names this
    case; sub-artifacts (directories with a meta.json, such as ``tracr/``) are verified too.
    """
    root = Path(path)
    _require_dir(root)
    if not (root / META_FILE).exists() and _names_model_type(root / CONFIG_FILE):
        raise ArtifactError(f"{root}: a plain Hugging Face checkpoint without ground truth (no meta.json), not a "
                            "cbench model artifact; verify checks ground-truth models only: run methods on it "
                            "with --model DIR")
    for name in (META_FILE, CONFIG_FILE, WEIGHTS_FILE):
        if not (root / name).exists():
            raise ArtifactError(f"{root}: not a model artifact ({name} is missing)")
    meta = _read_json(root / META_FILE)
    if verify:
        _check_doc(meta, "model-meta", f"{root / META_FILE}")
        _verify_files(root, meta)
    elif not isinstance(meta, dict):
        raise ArtifactError(f"{root / META_FILE}: not a JSON object")
    config = _read_json(root / CONFIG_FILE)
    if not isinstance(config, dict):
        raise ArtifactError(f"{root / CONFIG_FILE}: not a JSON object")
    circuit = correspondence = None
    if (root / CIRCUIT_FILE).exists():
        circuit = _read_json(root / CIRCUIT_FILE)
    if (root / CORRESPONDENCE_FILE).exists():
        correspondence = _read_json(root / CORRESPONDENCE_FILE)
    if verify:
        where = str(root)
        check_output_convention(config, meta, where)
        _check_weights_header(root / WEIGHTS_FILE, meta, where)
        if circuit is not None:
            _check_doc(circuit, "circuit", f"{root / CIRCUIT_FILE}")
            _check_circuit(circuit, config, meta, where)
        if correspondence is not None:
            _check_doc(correspondence, "correspondence", f"{root / CORRESPONDENCE_FILE}")
            _check_correspondence(correspondence, config, meta, where)
        for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if (sub / META_FILE).is_file():
                read_model_artifact(sub, verify=True)
    return ModelArtifact(path=root, config=config, meta=meta, circuit=circuit, correspondence=correspondence,
                         verified=verify)


def verify_artifact(path: str | os.PathLike) -> ModelArtifact:
    """:func:`read_model_artifact` with every check on; raises on the first problem."""
    return read_model_artifact(path, verify=True)


# ---------------------------------------------------------------------------- writing
_PLACEHOLDER_SHA = "0" * 64


def _prepare_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(meta, Mapping):
        raise ArtifactError(f"meta must be a dict (got {type(meta).__name__})")
    out = json.loads(dumps_json(dict(meta)))  # a deep, JSON-only copy (refuses NaN, non-JSON types)
    out.setdefault("schema", "cbench/model-meta/v1")
    if "cbench_version" not in out:
        from cbench.about import __version__

        out["cbench_version"] = __version__
    out["files"] = {CONFIG_FILE: _PLACEHOLDER_SHA, WEIGHTS_FILE: _PLACEHOLDER_SHA}
    return out


def _json_copy(doc: Any, what: str) -> dict:
    if not isinstance(doc, Mapping):
        raise ArtifactError(f"{what} must be a dict (got {type(doc).__name__})")
    return json.loads(dumps_json(dict(doc)))


def _copy_subartifact(src: Path, dst: Path, name: str) -> None:
    if not src.exists():
        raise ArtifactError(f"sub-artifact {name!r}: {src} does not exist")
    if src.is_dir():
        if (src / META_FILE).is_file():
            read_model_artifact(src, verify=True)  # refuse to embed a broken artifact
        dst.mkdir(parents=True)
        for rel in artifact_files(src):
            target = dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, target)  # follows links; copies bytes only
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def _check_subartifact_name(name: str) -> None:
    rel = PurePosixPath(name)
    if (not name or rel.is_absolute() or ".." in rel.parts or "\\" in name or _is_hidden(rel)
            or str(rel) != name or rel.parts[0] in RESERVED_NAMES):
        raise ArtifactError(f"sub-artifact name {name!r} must be a plain relative path (no '..', no dotfiles) "
                            f"that does not clash with {', '.join(sorted(RESERVED_NAMES))}")


def write_model_artifact(
    path: str | os.PathLike,
    model,
    meta: Mapping[str, Any],
    circuit: Mapping[str, Any] | None = None,
    correspondence: Mapping[str, Any] | None = None,
    readme: str | None = None,
    subartifacts: Mapping[str, str | os.PathLike] | None = None,
    *,
    overwrite: bool = False,
    tokenizer: bool = True,
    native_bridge: bool = True,
) -> ModelArtifact:
    """Write ``model`` (a HookedTransformer) as an artifact directory at ``path``.

    ``meta`` is a model-meta document; ``schema`` and ``cbench_version`` are filled in when
    absent and ``files`` is always computed here (sha256 of every file but meta.json, relative
    POSIX paths, files inside sub-artifacts included). ``subartifacts`` maps a name (e.g.
    ``"tracr"``) to a directory (an artifact, verified before it is copied) or a file to copy in.
    Every JSON document is validated before anything is written, and the finished directory is
    verified by reading it back before it replaces anything. With ``tokenizer`` (the default)
    the model's ``tokenizer.json`` is written too (:mod:`cbench.artifacts.tokenizer`); with ``native_bridge``
    (the default) the TransformerLens 4 files ``bridge/config.json`` and ``bridge/model.safetensors``
    (:mod:`cbench.artifacts.native_bridge`; left out for a model that form cannot compute).
    ``config.json`` says ``default_prepend_bos: true`` whenever ``meta`` names a ``bos_token``, and
    leaves ``dtype`` out when it is float32, so ``HookedTransformerConfig(**config)`` takes the file as it is.
    Returns the verified artifact.
    """
    from cbench.artifacts.transformer_lens_adapter import (
        config_to_json,
        model_state_dict,
    )

    target = Path(path)
    if not (hasattr(model, "cfg") and hasattr(model, "state_dict")):
        raise ArtifactError(f"model must be a HookedTransformer (got {type(model).__name__})")
    if target.exists() and not overwrite:
        raise ArtifactError(f"{target} already exists (pass overwrite=True to replace it)")
    if target.exists() and not target.is_dir():
        raise ArtifactError(f"{target} exists and is not a directory; refusing to replace it")
    subartifacts = dict(subartifacts or {})
    for name in subartifacts:
        _check_subartifact_name(name)

    # ---- build and check every document in memory first
    where = str(target)
    config = config_to_json(model.cfg)
    meta_doc = _prepare_meta(meta)
    if meta_doc.get("bos_token") is not None:  # inputs start with BOS: TransformerLens must prepend it
        config["default_prepend_bos"] = True
    if config.get("dtype") == "float32":  # TransformerLens's default; HookedTransformerConfig(**config) refuses a string
        del config["dtype"]
    _check_doc(meta_doc, "model-meta", "meta")
    check_output_convention(config, meta_doc, where)
    circuit_doc = corr_doc = None
    if circuit is not None:
        circuit_doc = _json_copy(circuit, "circuit")
        _check_doc(circuit_doc, "circuit", "circuit")
        _check_circuit(circuit_doc, config, meta_doc, where)
    if correspondence is not None:
        corr_doc = _json_copy(correspondence, "correspondence")
        _check_doc(corr_doc, "correspondence", "correspondence")
        _check_correspondence(corr_doc, config, meta_doc, where)
    if readme is not None and not isinstance(readme, str):
        raise ArtifactError(f"readme must be a string (got {type(readme).__name__})")
    state = model_state_dict(model)
    weights = _safetensors_bytes(
        state,
        {"format": "pt", "cbench_format": MODEL_FORMAT, "case": str(meta_doc["case"]),
         "model_kind": str(meta_doc["model_kind"])},
    )
    from cbench.artifacts.native_bridge import bridge_files

    bridge = bridge_files(config, state) if native_bridge else {}

    # ---- write beside the target, verify, rename into place
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArtifactError(f"{parent}: cannot create it ({e.strerror or e})") from None
    _remove_stale_temporaries(parent, target.name)
    tmp = parent / f".{target.name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        tmp.mkdir()
        (tmp / CONFIG_FILE).write_bytes(dumps_json(config))
        (tmp / WEIGHTS_FILE).write_bytes(weights)
        if circuit_doc is not None:
            (tmp / CIRCUIT_FILE).write_bytes(dumps_json(circuit_doc))
        if corr_doc is not None:
            (tmp / CORRESPONDENCE_FILE).write_bytes(dumps_json(corr_doc))
        if readme is not None:
            text = readme if readme.endswith("\n") else readme + "\n"
            (tmp / README_FILE).write_bytes(text.encode("utf-8"))
        if tokenizer:
            from cbench.artifacts.tokenizer import write_tokenizer

            write_tokenizer(tmp, meta_doc)
        for rel, data in sorted(bridge.items()):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        for name, src in sorted(subartifacts.items()):
            _copy_subartifact(Path(src), tmp / name, name)
        meta_doc["files"] = {rel: sha256_file(tmp / rel) for rel in artifact_files(tmp) if rel != META_FILE}
        _check_doc(meta_doc, "model-meta", "meta")
        (tmp / META_FILE).write_bytes(dumps_json(meta_doc))
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb+") as fh:
                    os.fsync(fh.fileno())
        read_model_artifact(tmp, verify=True)
        _replace_dir(tmp, target, overwrite)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArtifactError(f"{target}: cannot write the artifact ({e.strerror or e})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return read_model_artifact(target, verify=True)


STALE_TEMPORARY_S = 3600.0  # a temporary directory untouched this long is left from a killed write


def _remove_stale_temporaries(parent: Path, name: str, max_age_s: float = STALE_TEMPORARY_S) -> None:
    """Remove ``.NAME.tmp-*`` directories that a killed write left beside ``parent/name`` (a
    write cleans up after any error it sees; only a killed process leaves one). A directory
    modified within ``max_age_s`` may belong to a write in progress and is kept."""
    import time

    now = time.time()
    for stale in parent.glob(f".{name}.tmp-*"):
        try:
            if stale.is_dir() and now - stale.stat().st_mtime > max_age_s:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass


def _replace_dir(tmp: Path, target: Path, overwrite: bool) -> None:
    """Rename ``tmp`` to ``target``; an existing target is moved aside first and restored if
    the rename fails, then removed."""
    if not target.exists():
        os.rename(tmp, target)
        return
    if not overwrite:
        raise ArtifactError(f"{target} already exists (pass overwrite=True to replace it)")
    backup = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(target, backup)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(backup, target)
        raise
    shutil.rmtree(backup, ignore_errors=True)
