"""Everything cbench needs from pyvene, in one place.

This is the ONLY module of the client that imports ``pyvene``. pyvene is cbench's intervention
engine for the causal-variable track (:mod:`cbench.localization`); the rest of cbench talks to it
through:

* :class:`Site` -- a hidden vector of a cbench model that pyvene can intervene on: the residual
  stream entering a layer (``resid_pre``) or leaving the last one (``resid_post``), one attention
  head's ``hook_z`` (``[d_head]``) or ``hook_result`` (``[d_model]``), an MLP's output
  (``mlp_out``), at every position or at chosen positions;
* :class:`BasisIntervention` -- a pyvene intervention that swaps the span of an orthonormal basis
  ``Q`` between base and source: ``h_b + Q Q^T (h_s - h_b)``. ``Q = frame @ W``: the frame selects
  coordinates (the identity, or residual dimensions Tracr assigned to a variable), ``W`` is the
  featurizer's basis (identity, PCA, random, or learned by DAS through pyvene's
  ``LowRankRotateLayer`` under torch's orthogonal parametrization);
* :func:`intervenable` / :func:`interchange` -- an ``IntervenableModel`` over one or more sites
  (intervened together, one source run) and its interchange forward, returning logits;
* :func:`collect` -- a site's activations (pyvene's ``CollectIntervention``), e.g. for PCA.
* :class:`HookedInterchange` -- the same interchange as :func:`interchange` with plain forward
  hooks on the model's hook points and the sources' activations computed once: what fitting a
  featurizer runs at every optimiser step (pyvene's per-call overhead was most of a fit's time on
  the small models; the outputs are equal to pyvene's, tested). IIA is always scored by pyvene.

pyvene 0.1.8 quirks handled here (read from its source; none leaks out of this module):

* pyvene resolves components through ``type_to_module_mapping`` / ``type_to_dimension_mapping``
  keyed by the model's class; HookedTransformer is not in them, so :func:`prepare` registers it
  (components are TransformerLens hook points, whose forward hooks pyvene uses);
* it reads ``model.config`` (dimensions by attribute name) and ``model.device``, which a
  HookedTransformer lacks: :func:`prepare` sets them (``config`` is the model's ``cfg``);
* its head units (``h.pos``) expect a component output of shape ``[batch, pos, heads * d]`` (the
  Hugging Face layout) and scatter by viewing the last dimension as ``heads x d``; TransformerLens's
  ``hook_z``/``hook_result`` are ``[batch, pos, heads, d]``, which is the shape mismatch a
  plain registration runs into. :func:`prepare` gives each of these hook points a child module
  that sees the flattened ``[batch, pos, heads * d]`` view (a persistent forward hook routes the
  output through it and reshapes back), and the mapping points pyvene at that child;
* every pyvene run removes *all* forward hooks of the model (its own and anyone else's, e.g.
  TransformerLens hooks added with ``add_hook``): the head view is therefore part of the hook
  point's forward, not a hook, and a prepared model should be used through pyvene only;
* building an ``IntervenableModel`` turns off ``requires_grad`` on every model parameter (only
  the interventions train), for good;
* importing pyvene prints a line about nnsight on stdout: silenced;
* its interventions flatten ``[batch, units, d]`` to ``[batch, units * d]`` unless
  ``keep_last_dim`` is set; cbench's featurizers act on each position's vector, so it is set.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cbench.artifacts.transformer_lens_adapter import HookedTransformer
from cbench.errors import GraphError

with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pyvene
    from pyvene.models import intervenable_modelcard as _modelcard
    from pyvene.models.constants import CONST_OUTPUT_HOOK, split_head_and_permute
    from pyvene.models.interventions import (
        CollectIntervention,
        DistributedRepresentationIntervention,
        TrainableIntervention,
    )
    from pyvene.models.layers import LowRankRotateLayer

__all__ = [
    "PYVENE_VERSION",
    "SITE_KINDS",
    "BasisIntervention",
    "HookedInterchange",
    "MaskIntervention",
    "Site",
    "collect",
    "interchange",
    "intervenable",
    "prepare",
]

PYVENE_VERSION: str = getattr(pyvene, "__version__", "0.1.8")

_HEADS_CHILD = "cbench_heads"  # the child module of hook_z / hook_result that sees [b, s, h*d]

# component -> (module path with %s for the layer, hook type[, split of the last dim])
_MODULES = {
    "resid_pre": ("blocks[%s].hook_resid_pre", CONST_OUTPUT_HOOK),
    "resid_post": ("blocks[%s].hook_resid_post", CONST_OUTPUT_HOOK),
    "mlp_out": ("blocks[%s].hook_mlp_out", CONST_OUTPUT_HOOK),
    "attn_out": ("blocks[%s].hook_attn_out", CONST_OUTPUT_HOOK),
    "head_z": (f"blocks[%s].attn.hook_z.{_HEADS_CHILD}", CONST_OUTPUT_HOOK, (split_head_and_permute, "n_heads")),
    "head_result": (f"blocks[%s].attn.hook_result.{_HEADS_CHILD}", CONST_OUTPUT_HOOK,
                    (split_head_and_permute, "n_heads")),
}
# component -> the HookedTransformerConfig attribute giving its per-unit width
_DIMENSIONS = {
    "n_heads": ("n_heads",),
    "resid_pre": ("d_model",),
    "resid_post": ("d_model",),
    "mlp_out": ("d_model",),
    "attn_out": ("d_model",),
    "head_z": ("d_head",),
    "head_result": ("d_model",),
}
SITE_KINDS = tuple(_MODULES)
_HEAD_KINDS = ("head_z", "head_result")


@dataclass(frozen=True)
class Site:
    """A hidden vector pyvene intervenes on: ``kind`` (one of :data:`SITE_KINDS`) at ``layer``
    (and ``head`` for the head kinds), at ``positions`` (``None``: every position)."""

    kind: str
    layer: int
    head: int | None = None
    positions: tuple[int, ...] | None = None

    def __post_init__(self):
        if self.kind not in _MODULES:
            raise GraphError(f"unknown site kind {self.kind!r} (one of {', '.join(SITE_KINDS)})")
        if (self.kind in _HEAD_KINDS) != (self.head is not None):
            raise GraphError(f"site {self.kind}: a head index is needed for {', '.join(_HEAD_KINDS)} and only there")

    def width(self, model: HookedTransformer) -> int:
        """The size of the hidden vector at one position (and head)."""
        return int(getattr(model.cfg, _DIMENSIONS[self.kind][0]))

    def check(self, model: HookedTransformer) -> None:
        cfg = model.cfg
        if not 0 <= self.layer < cfg.n_layers:
            raise GraphError(f"layer {self.layer} is not in the model (it has {cfg.n_layers} layers)")
        if self.head is not None and not 0 <= self.head < cfg.n_heads:
            raise GraphError(f"head {self.head} is not in the model (it has {cfg.n_heads} heads per layer)")
        if self.kind == "mlp_out" and cfg.attn_only:
            raise GraphError("the model is attention-only: it has no MLP outputs")


# ---------------------------------------------------------------------------- preparing a model
def _register_type() -> None:
    _modelcard.type_to_module_mapping.setdefault(HookedTransformer, dict(_MODULES))
    _modelcard.type_to_dimension_mapping.setdefault(HookedTransformer, dict(_DIMENSIONS))


class _HeadsView(torch.nn.Module):
    """Pass-through; pyvene hooks its output, the ``[batch, pos, heads * d]`` view of a head hook."""

    def forward(self, x):
        return x


_ROUTED: dict[type, type] = {}


def _routed_class(cls: type) -> type:
    """``cls`` (TransformerLens's HookPoint) whose forward passes the flattened heads through the
    child view. A forward, not a forward hook: pyvene removes every forward hook of the model
    before each run."""
    if cls not in _ROUTED:
        def forward(self, x):
            b, s, h, d = x.shape
            return getattr(self, _HEADS_CHILD)(x.reshape(b, s, h * d)).reshape(b, s, h, d)

        _ROUTED[cls] = type(f"Routed{cls.__name__}", (cls,), {"forward": forward})
    return _ROUTED[cls]


def prepare(model: HookedTransformer) -> HookedTransformer:
    """Make a cbench HookedTransformer usable by pyvene (idempotent; returns the model).

    Registers the class in pyvene's mappings, sets ``model.config``/``model.device`` and gives
    every ``hook_z``/``hook_result`` a flattened view for pyvene's head units. The model's
    outputs are unchanged (the view is the identity)."""
    if not isinstance(model, HookedTransformer):
        raise GraphError(f"pyvene sites need a HookedTransformer (got {type(model).__name__})")
    _register_type()
    if getattr(model, "_cbench_pyvene_ready", False):
        return model
    model.config = model.cfg
    try:
        model.device = next(model.parameters()).device
    except StopIteration:  # pragma: no cover - a model always has parameters
        model.device = torch.device("cpu")
    for block in model.blocks:
        for hook in (block.attn.hook_z, block.attn.hook_result):
            hook.add_module(_HEADS_CHILD, _HeadsView())
            hook.__class__ = _routed_class(type(hook))
    model._cbench_pyvene_ready = True
    return model


# ---------------------------------------------------------------------------- the featurizer intervention
class BasisIntervention(TrainableIntervention, DistributedRepresentationIntervention):
    """Interchange the span of ``Q = frame @ W`` between base and source, per position:
    ``h_b + Q Q^T (h_s - h_b)``.

    ``frame`` ``[n, m]`` has orthonormal columns (the coordinates the featurizer sees; the
    identity for a whole hidden vector). ``W`` ``[m, k]`` is ``basis`` when given (fixed), else a
    trainable ``LowRankRotateLayer`` kept orthonormal by torch's orthogonal parametrization
    (DAS), initialised at random (seeded by the caller's torch generator state)."""

    def __init__(self, frame: torch.Tensor, k: int | None = None, basis: torch.Tensor | None = None, **kwargs):
        kwargs.setdefault("keep_last_dim", True)
        super().__init__(**kwargs)
        frame = torch.as_tensor(frame, dtype=torch.float32)
        self.register_buffer("frame", frame)
        m = frame.shape[1]
        if basis is not None:
            basis = torch.as_tensor(basis, dtype=torch.float32)
            if basis.shape[0] != m:
                raise ValueError(f"basis has {basis.shape[0]} rows, the frame {m} columns")
            self.register_buffer("basis", basis)
            self.rotate_layer = None
            self.trainable = False
        else:
            if k is None or not 1 <= k <= m:
                raise ValueError(f"k must be between 1 and {m} (got {k})")
            self.basis = None
            self.rotate_layer = torch.nn.utils.parametrizations.orthogonal(LowRankRotateLayer(m, int(k)))
        n = frame.shape[0]
        eye = torch.eye(n)
        self.swaps_everything = (basis is not None and frame.shape == (n, n) and basis.shape == (n, n)
                                 and torch.equal(frame, eye) and torch.equal(basis, eye))

    @property
    def k(self) -> int:
        return int(self.W().shape[1])

    def W(self) -> torch.Tensor:
        return self.basis if self.basis is not None else self.rotate_layer.weight

    def Q(self) -> torch.Tensor:
        return self.frame @ self.W()

    def forward(self, base, source, subspaces=None, **kwargs):
        if self.swaps_everything:
            return source.clone()  # the full vector: exactly the source's values
        Q = self.Q().to(base.dtype)
        return base + ((source - base) @ Q) @ Q.T

    def __str__(self):
        return f"BasisIntervention(n={self.frame.shape[0]}, k={self.k})"


class MaskIntervention(TrainableIntervention, DistributedRepresentationIntervention):
    """Desiderata-based masking (DBM): interchange the features a mask selects, per position.

    Features of a vector ``h`` (in the ``frame``'s coordinates ``x = frame^T h``): ``x @ P`` for an
    orthonormal ``P`` ``[m, m]`` (the standard dimensions: the identity; PCA: the principal
    components), or an SAE's ``f(x)`` (``sae``: a :class:`cbench.localization.sae.SAE`, whose
    decoder maps a feature change back, so the base's reconstruction error is kept). The result
    is ``h_b + frame (delta)`` with ``delta = ((x_s - x_b) @ P) diag(m) P^T`` or
    ``(m * (f(x_s) - f(x_b))) W_dec``. The mask is ``sigmoid(logits / temperature)`` while
    training and ``logits > 0`` once :attr:`hard` is set."""

    def __init__(self, frame: torch.Tensor, P: torch.Tensor | None = None, sae=None, **kwargs):
        kwargs.setdefault("keep_last_dim", True)
        super().__init__(**kwargs)
        self.register_buffer("frame", torch.as_tensor(frame, dtype=torch.float32))
        self.sae = sae
        if sae is None:
            self.register_buffer("P", torch.as_tensor(P, dtype=torch.float32))
            n = self.P.shape[1]
        else:
            self.P = None
            n = sae.n_features
        self.mask_logits = torch.nn.Parameter(torch.zeros(n))
        self.temperature = 1.0
        self.hard = False

    def mask(self) -> torch.Tensor:
        if self.hard:
            return (self.mask_logits > 0).float()
        return torch.sigmoid(self.mask_logits / self.temperature)

    @property
    def k(self) -> int:
        return int((self.mask_logits > 0).sum())

    def forward(self, base, source, subspaces=None, **kwargs):
        F = self.frame.to(base.dtype)
        xb, xs = base @ F, source @ F
        m = self.mask().to(base.dtype)
        if self.sae is None:
            P = self.P.to(base.dtype)
            delta = (((xs - xb) @ P) * m) @ P.T
        else:
            delta = (m * (self.sae.encode(xs) - self.sae.encode(xb))) @ self.sae.W_dec.to(base.dtype)
        return base + delta @ F.T

    def __str__(self):
        return f"MaskIntervention(n={self.frame.shape[0]}, features={self.mask_logits.shape[0]})"


# ---------------------------------------------------------------------------- running interventions
def _representation(site: Site, intervention) -> dict:
    return {"layer": int(site.layer), "component": site.kind, "unit": "h.pos" if site.head is not None else "pos",
            "max_number_of_units": 1, "intervention": intervention, "group_key": 0}


def intervenable(model: HookedTransformer, sites: Sequence[Site], interventions: Sequence) -> pyvene.IntervenableModel:
    """An ``IntervenableModel`` applying ``interventions[i]`` at ``sites[i]``, all from one source."""
    if len(sites) != len(interventions) or not sites:
        raise ValueError("one intervention per site, and at least one site")
    prepare(model)
    for s in sites:
        s.check(model)
    config = pyvene.IntervenableConfig(representations=[_representation(s, iv) for s, iv in zip(sites, interventions)],
                                       mode="parallel")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyvene.IntervenableModel(config, model)


def _locations(site: Site, batch: int, n_pos: int):
    pos = list(range(n_pos)) if site.positions is None else [int(p) for p in site.positions]
    if any(not 0 <= p < n_pos for p in pos):
        raise GraphError(f"positions {site.positions} are not all in 0..{n_pos - 1}")
    if site.head is None:
        return [pos] * batch
    return [[[site.head]] * batch, [pos] * batch]


def _unit_locations(sites: Sequence[Site], batch: int, n_pos: int) -> dict:
    locs = [_locations(s, batch, n_pos) for s in sites]
    return {"sources->base": (locs, locs)}


def interchange(iv, sites: Sequence[Site], base: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Logits of the model on ``base`` with every site's intervention fed from ``source``."""
    B, P = base.shape
    _, out = iv({"input": base}, [{"input": source}], unit_locations=_unit_locations(sites, B, P))
    return out


def collect(model: HookedTransformer, site: Site, inputs: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """The site's activations on ``inputs``: ``[N, n_positions, width]``."""
    prepare(model)
    site.check(model)
    rep = _representation(site, CollectIntervention(keep_last_dim=True))
    rep.pop("group_key")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iv = pyvene.IntervenableModel(pyvene.IntervenableConfig(representations=[rep]), model)
    chunks = []
    with torch.no_grad():
        for start in range(0, inputs.shape[0], batch_size):
            x = inputs[start:start + batch_size]
            B, P = x.shape
            locs = _locations(site, B, P)
            (_, acts), _ = iv({"input": x}, unit_locations={"base": [locs]})
            a = acts[0]
            if site.head is not None:  # [b, heads(1), pos, d]
                a = a[:, 0]
            chunks.append(a.detach())
    return torch.cat(chunks, 0)


# ---------------------------------------------------------------------------- the interchange as plain hooks
_HOOK_NAMES = {
    "resid_pre": "blocks.%d.hook_resid_pre",
    "resid_post": "blocks.%d.hook_resid_post",
    "mlp_out": "blocks.%d.hook_mlp_out",
    "attn_out": "blocks.%d.hook_attn_out",
    "head_z": "blocks.%d.attn.hook_z",
    "head_result": "blocks.%d.attn.hook_result",
}


def _index(site: Site):
    """The index of the site's vectors ``[batch, positions, width]`` in its hook point's output."""
    pos = slice(None) if site.positions is None else list(site.positions)
    return (slice(None), pos) if site.head is None else (slice(None), pos, site.head)


class HookedInterchange:
    """:func:`interchange` of ``interventions`` at ``sites`` without pyvene: the sources' vectors
    at the sites (:meth:`sources`, from an unintervened run) replace the base's through each
    intervention, in one forward pass of the base with forward hooks on the sites' hook points
    (registered for the call and removed after it). For fitting featurizers: gradients flow to the
    interventions' parameters as through pyvene's.

    ``group`` (one index per site, default all 0) runs several interchanges side by side: the
    base batch is repeated once per group, and site ``i`` acts only on copy ``group[i]`` (the
    logits of copy ``g`` are rows ``g * B`` to ``(g + 1) * B``)."""

    def __init__(self, model: HookedTransformer, sites: Sequence[Site], interventions: Sequence,
                 group: Sequence[int] | None = None):
        if len(sites) != len(interventions) or not sites:
            raise ValueError("one intervention per site, and at least one site")
        group = [0] * len(sites) if group is None else [int(g) for g in group]
        if len(group) != len(sites) or min(group) < 0:
            raise ValueError("one group index (0 or more) per site")
        prepare(model)
        for s in sites:
            s.check(model)
        self.model, self.sites, self.interventions, self.group = model, list(sites), list(interventions), group
        self.n_groups = max(group) + 1
        self.modules = [model.hook_dict[_HOOK_NAMES[s.kind] % s.layer] for s in self.sites]

    def _run(self, inputs: torch.Tensor, hook_fn) -> torch.Tensor:
        by_module: dict[int, list[int]] = {}
        for i, m in enumerate(self.modules):
            by_module.setdefault(id(m), []).append(i)
        handles = [self.modules[ix[0]].register_forward_hook(hook_fn(ix)) for ix in by_module.values()]
        try:
            return self.model(inputs)
        finally:
            for h in handles:
                h.remove()

    @torch.no_grad()
    def sources(self, source: torch.Tensor) -> list[torch.Tensor]:
        """Each site's vectors on ``source``: ``[batch, positions, width]`` per site."""
        acts: list = [None] * len(self.sites)

        def keep(ix):
            def fn(_module, _inputs, out):
                for i in ix:
                    acts[i] = out[_index(self.sites[i])].detach().clone()
            return fn

        self._run(source, keep)
        return acts

    def __call__(self, base: torch.Tensor, source_acts: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits of the model on ``base`` (repeated once per group) with each site's vectors
        interchanged from ``source_acts`` (:meth:`sources` of the source inputs, row for row)."""
        B = base.shape[0]

        def swap(ix):
            def fn(_module, _inputs, out):
                out = out.clone()
                for i in ix:
                    rows = slice(self.group[i] * B, (self.group[i] + 1) * B)
                    idx = (rows, *_index(self.sites[i])[1:])
                    out[idx] = self.interventions[i](out[idx], source_acts[i].to(out.dtype))
                return out
            return fn

        return self._run(base.repeat(self.n_groups, 1) if self.n_groups > 1 else base, swap)
