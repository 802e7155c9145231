"""What the API's calls accept for a case and for edge scores, resolved in one place.

A case is a case name (``"case-3"``, ``"tracr-case-3"``, ``"cbench/case-3@v2.0.0"``; pulled
when not cached, answered from the cache offline), a model artifact directory (a
:class:`~pathlib.Path` or a string naming an existing directory), a :class:`PullResult` or a
:class:`~cbench.artifacts.model.ModelArtifact` (what :func:`cbench.load` returns). Edge scores
are a :class:`DiscoveryResult`, an edge-scores document (a dict), or the path of an edge-scores
file or of a MIB/EAP-IG graph file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cbench.api.results import DiscoveryResult, PullResult
from cbench.errors import UsageError


@dataclass(frozen=True)
class ResolvedCase:
    artifact: Any  #: the ModelArtifact
    model: dict  #: ``{"repo", "revision", "kind"}``


def resolve_case(case: Any, *, revision: str | None = None, endpoint: str | None = None,
                 hub: str | os.PathLike | None = None, verify: bool = True) -> ResolvedCase:
    """The model artifact of ``case`` and where it came from (see the module docstring)."""
    from cbench.artifacts.model import ModelArtifact, read_model_artifact

    if isinstance(case, ModelArtifact):
        return ResolvedCase(case, _ref_of_path(case.path, case.model_kind))
    if isinstance(case, PullResult):
        if case.repo_type != "model":
            raise UsageError(f"{case.repo_id} is a dataset, not a case")
        art = read_model_artifact(case.path, verify=verify)
        return ResolvedCase(art, {"repo": case.repo_id, "revision": case.revision, "kind": art.model_kind})
    if isinstance(case, os.PathLike) or (isinstance(case, str) and Path(case).exists()):
        p = Path(case)
        if not p.is_dir():
            raise UsageError(f"{case}: not a model artifact directory")
        art = read_model_artifact(p, verify=verify)
        return ResolvedCase(art, _ref_of_path(p, art.model_kind))
    if not isinstance(case, str) or not case.strip():
        raise UsageError(f"a case is a case name such as 'case-3', a model artifact directory, a PullResult or "
                         f"a ModelArtifact (got {case!r})")
    from cbench.hub.pull import pull

    snap = pull(case, revision, repo_type="model", endpoint=endpoint, hub=hub)
    art = read_model_artifact(snap.path, verify=verify)
    return ResolvedCase(art, {"repo": snap.repo_id, "revision": snap.tag or snap.sha, "kind": art.model_kind})


class Spelling:
    """How an error message names the caller's arguments: the Python API's keywords
    (``ablation='mean'``, ``params['ablation']='zero'``) or the command's options (``--ablation
    mean``, ``--param ablation=zero``), so a step written once speaks each caller's language."""

    def __init__(self, command: bool):
        self.command = command

    def flag(self, name: str) -> str:
        return f"--{name}" if self.command else name

    def option(self, name: str, value: Any) -> str:
        return f"--{name} {value}" if self.command else f"{name}={value!r}"

    def param(self, key: str, value: Any) -> str:
        return f"--param {key}={value}" if self.command else f"params[{key!r}]={value!r}"


API_SPELLING, COMMAND_SPELLING = Spelling(command=False), Spelling(command=True)

PROTOCOLS = ("cbench", "mib")


def check_protocol(protocol: Any) -> str:
    """``protocol`` if it is one cbench runs (``cbench``: the papers' procedures; ``mib``: MIB's
    reference code's), else a one-line UsageError."""
    if protocol not in PROTOCOLS:
        raise UsageError(f"protocol must be cbench (the papers' procedures) or mib (MIB's reference code's; "
                         f"docs/mib-parity.md), got {protocol!r}")
    return protocol


def _ref_of_path(path, kind: str) -> dict:
    """A directory in the cache names its repository and commit; any other has neither."""
    from cbench.hub.cache import snapshot_of_path

    found = snapshot_of_path(path)
    if found is None:
        return {"repo": None, "revision": None, "kind": kind}
    return {"repo": found[0], "revision": found[1], "kind": kind}


def scores_document(scores: Any, artifact) -> tuple[dict, str]:
    """(the edge-scores document, a label for messages) of ``scores`` for the case ``artifact``."""
    if isinstance(scores, DiscoveryResult):
        return dict(scores.document), f"the {scores.method} scores"
    if isinstance(scores, Mapping):
        return dict(scores), "the edge-scores document"
    if isinstance(scores, (str, os.PathLike)):
        from cbench.artifacts.mib_format import load_scores

        return load_scores(str(scores), artifact), str(scores)
    raise UsageError("edge scores are a DiscoveryResult, an edge-scores document (dict) or the path of an "
                     f"edge-scores or MIB graph file (got {type(scores).__name__})")
