"""The high-level model of a case: a compiled Tracr model (TransformerLens artifact) whose
operations can be interchanged one at a time.

Used by the dataset builder (labels are the high-level model's outputs) and by SIIT (interchange
interventions on high-level variables). Everything is batched: ``tokens`` are LongTensors
``[batch, pos]`` of input ids with BOS at position 0 (``encode`` builds them).

Interchanging an op sets its value, at every position, to the value it takes on the source
input: for an op computed by attention, the op's head output (``hook_result`` of its head(s));
for an op computed by an MLP, the op's own hidden neurons in that layer's MLP (``hook_post``
slice ``hidden_neurons`` from circuit.json; Tracr concatenates the MLPs of one layer, and each
op's hidden neurons write only that op's residual directions); for a selector, the output of the
head(s) that use it -- the unit ``correspondence.json`` maps it to, so per-op IIA computed from
the dataset and the correspondence agree (a selector alone, i.e. the attention pattern, has no
low-level image at component granularity); for ``tokens`` / ``indices``, the token / positional
embedding. Everything else is recomputed from the base input, so downstream ops see the
interchanged value.

Labels exclude position 0 (BOS). Categorical labels are output-class indices (``meta
["output_classes"][i]``; :meth:`decode` turns them into values), or ``NO_CLASS`` where the
program's value is ``None`` (Tracr writes it as an all-zero output, so every class ties);
numerical labels are floats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from cbench.errors import BuildError, UsageError, did_you_mean
from cbench.tasks.labels import NO_CLASS, TIE_GAP, high_level_classes  # one definition, in the client

__all__ = ["NO_CLASS", "TIE_GAP", "HighLevelModel", "high_level_classes"]


def _mlp_hidden_hook(layer: int) -> str:
    # The MLP's post-activation hidden units ([batch, pos, d_mlp]). Spelled here because
    # cbench.artifacts.transformer_lens_adapter has no helper for it (yet).
    return f"blocks.{int(layer)}.mlp.hook_post"


@dataclass(frozen=True)
class _Patch:
    hook: str
    dim: int | None  # the dimension indexed by ``index`` (None: the whole activation)
    index: tuple[int, ...] = ()


class HighLevelModel:
    """A compiled Tracr model with per-op interchange. Build it with :meth:`from_artifact`."""

    def __init__(self, model, meta: dict, circuit: dict):
        self.model = model
        self.meta = meta
        self.circuit = circuit
        self.task_type: str = meta["task_type"]
        self.input_tokens: list = list(meta["input_tokens"])
        self.output_classes: list | None = meta.get("output_classes")
        self.bos = meta["bos_token"]
        self.pad = meta.get("pad_token")
        self._token_id = {t: i for i, t in enumerate(self.input_tokens)}
        self._ops = {op["name"]: op for op in (circuit.get("high_level") or {}).get("ops", [])}
        self._patches = {name: p for name, op in self._ops.items() if (p := self._patch_for(op)) is not None}

    @classmethod
    def from_artifact(cls, artifact: Any) -> "HighLevelModel":
        """From a tracr model artifact directory (or a :class:`cbench.artifacts.model.ModelArtifact`)."""
        from cbench.artifacts.model import ModelArtifact, read_model_artifact

        if not isinstance(artifact, ModelArtifact):
            artifact = read_model_artifact(os.fspath(artifact), verify=True)
        if artifact.circuit is None or "high_level" not in artifact.circuit:
            raise BuildError(f"{artifact.path}: a high-level model needs circuit.json with high_level ops")
        return cls(artifact.load_model(), artifact.meta, artifact.circuit)

    # ------------------------------------------------------------------ inputs and outputs
    @property
    def ops(self) -> list[str]:
        """Names of the ops that can be interchanged (computed by a head or an MLP)."""
        return list(self._patches)

    def op(self, name: str) -> dict:
        if name not in self._ops:
            raise UsageError(f"op {name!r} is not in case {self.meta['case']}'s program" + did_you_mean(name, self._ops))
        return self._ops[name]

    def encode(self, seqs: Sequence[Sequence[Any]]):
        """Token ids ``[batch, 1 + longest]`` for input sequences (without BOS); shorter ones are
        padded with PAD (which needs a case with a PAD token)."""
        import torch

        width = 1 + max(len(s) for s in seqs)
        if any(len(s) + 1 != width for s in seqs) and self.pad is None:
            raise UsageError(f"case {self.meta['case']} has no PAD token: pass sequences of one length")
        fill = self._token_id[self.pad] if self.pad is not None else 0
        out = torch.full((len(seqs), width), fill, dtype=torch.long)
        for i, s in enumerate(seqs):
            try:
                out[i, : len(s) + 1] = torch.tensor([self._token_id[self.bos]] + [self._token_id[t] for t in s])
            except KeyError as exc:
                raise UsageError(f"token {exc.args[0]!r} is not in case {self.meta['case']}'s vocab") from None
        return out

    def _outputs(self, logits):
        from cbench.artifacts.transformer_lens_adapter import output_values

        return output_values(logits, self.task_type)

    def run(self, tokens):
        """Outputs ``[batch, pos, n_classes]`` logits (categorical) or ``[batch, pos]`` values."""
        import torch

        with torch.no_grad():
            return self._outputs(self.model(tokens))

    def to_labels(self, outputs):
        """Labels from :meth:`run`-style outputs: position 0 dropped; class indices (``NO_CLASS``
        where the top two logits tie, i.e. the program's value is ``None``) or values."""
        outputs = outputs[:, 1:]
        return high_level_classes(outputs) if self.task_type == "categorical" else outputs

    def labels(self, tokens):
        """``[batch, pos - 1]`` labels (position 0 excluded): class indices (or ``NO_CLASS``) or
        float values."""
        return self.to_labels(self.run(tokens))

    def decode(self, labels) -> list[list]:
        """Class indices -> output classes, ``NO_CLASS`` -> ``None`` (categorical); floats
        unchanged (numerical)."""
        rows = labels.tolist()
        if self.task_type != "categorical":
            return rows
        return [[None if i == NO_CLASS else self.output_classes[i] for i in row] for row in rows]

    # ------------------------------------------------------------------ interchange
    def _patch_for(self, op: dict) -> _Patch | None:
        from cbench.artifacts import transformer_lens_adapter as tla

        comp = op.get("component")
        heads = [c for c in op.get("components", []) if c.startswith("a")]
        if op.get("type", "").startswith("Select") and op.get("type") != "SelectorWidth":
            if not heads:
                return None
            # a selector is interchanged as the whole output of the head(s) that use it, the unit
            # correspondence.json maps it to (blocks.L.attn.hook_z[head]): swapping only the
            # attention pattern gave labels no low-level intervention in the correspondence matches
            # (for case 3's Select(indices, indices, LEQ) the base label every time)
            layer = int(heads[0][1:].split(".")[0])
            return _Patch(tla.head_output_hook(layer), 2, tuple(int(c.split(".h")[1]) for c in heads))
        if comp is None:
            return None
        if comp == "input":
            hook = {"tokens": tla.embed_hook(), "indices": tla.pos_embed_hook()}.get(op.get("name"))
            if hook is None and op.get("type") in ("TokensType", "IndicesType"):
                hook = tla.embed_hook() if op["type"] == "TokensType" else tla.pos_embed_hook()
            return _Patch(hook, None) if hook else None
        if comp.startswith("m"):
            layer = int(comp[1:])
            if "hidden_neurons" in op:
                start, end = op["hidden_neurons"]
                neurons = tuple(range(start, end))
            else:
                neurons = tuple(op["hidden_neuron_indices"])
            return _Patch(_mlp_hidden_hook(layer), 2, neurons)
        layer = int(heads[0][1:].split(".")[0])
        return _Patch(tla.head_output_hook(layer), 2, tuple(int(c.split(".h")[1]) for c in heads))

    def run_with_interchange(self, base_tokens, source_tokens, op_name: str | Sequence[str]):
        """Outputs on ``base_tokens`` with op(s) ``op_name`` set to their values on
        ``source_tokens`` (same shape). Same layout as :meth:`run`."""
        import torch

        names = [op_name] if isinstance(op_name, str) else list(op_name)
        patches = []
        for name in names:
            self.op(name)
            if name not in self._patches:
                raise UsageError(f"op {name!r} of case {self.meta['case']} is not computed by any component, "
                                 f"so it cannot be interchanged")
            patches.append(self._patches[name])
        if tuple(base_tokens.shape) != tuple(source_tokens.shape):
            raise UsageError(f"base and source tokens must have the same shape "
                             f"({tuple(base_tokens.shape)} vs {tuple(source_tokens.shape)})")
        hooks_needed = {p.hook for p in patches}
        with torch.no_grad():
            _, cache = self.model.run_with_cache(source_tokens, names_filter=lambda n: n in hooks_needed)
            by_hook: dict[str, list[_Patch]] = {}
            for p in patches:
                by_hook.setdefault(p.hook, []).append(p)

            def make_hook(hook_name, ps):
                src = cache[hook_name]

                def fn(act, hook):
                    act = act.clone()
                    for p in ps:
                        if p.dim is None:
                            act = src.clone()
                        else:
                            sel = [slice(None)] * act.dim()
                            sel[p.dim] = list(p.index)
                            act[tuple(sel)] = src[tuple(sel)]
                    return act
                return fn

            hooks = [(h, make_hook(h, ps)) for h, ps in by_hook.items()]
            return self._outputs(self.model.run_with_hooks(base_tokens, fwd_hooks=hooks))
