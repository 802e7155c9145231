"""A TransformerLens 4.x ``TransformerBridge`` as the runtime's model, with no TransformerLens import.

TransformerLens 4 removed ``HookedTransformer``, so a process that holds a bridge has no
TransformerLens model class cbench's runtime could run (cbench's own loading path,
:mod:`cbench.artifacts.transformer_lens_adapter`, needs TransformerLens 3.9). The runtime reads a
model only through a few attributes (the embedding, per layer ``ln1``/``attn``/``ln2``/``mlp``
and Gemma-2's post-norms, ``ln_final``, ``unembed`` and ``cfg``), so :func:`from_bridge` builds
exactly those from the bridge's Hugging Face model (``bridge.original_model``), in plain torch:

* the embedding, each MLP and the unembedding are copies of the checkpoint's own modules (the
  same code computes them);
* each layer's attention is its weights in TransformerLens's layout: ``W_Q``/``W_K``/``W_V``
  ``[n_heads, d_model, d_head]`` (a shared key/value head repeated for each of its query heads:
  the runtime's grouped-query edges, docs/real-models.md), ``W_O`` ``[n_heads, d_head, d_model]``,
  their biases, the score scale and the rotary ``cos``/``sin`` tables the checkpoint's own rotary
  module gives (its base, scaling and partial ``rotary_dim``);
* the norms are cbench's :class:`LayerNorm` and :class:`RMSNorm` holding the checkpoint's
  weights (Gemma-2's ``1 + w`` folded into ``w``), which compute what the checkpoint's norms do.

So cbench scores the checkpoint's computation, the one ``bridge(tokens)`` runs when the bridge's
weights are not processed. A bridge whose weights were processed (``enable_compatibility_mode()``
without ``no_processing=True``, or ``process_weights()``) is refused in one line: processing
writes folded weights into the Hugging Face modules, and what those then compute is not always
the processed bridge's function (measured: equal on Qwen-2.5, Llama-3.1 and Gemma-2, 0.014 and
0.058 off on GPT-2 and Pythia; docs/real-models.md).

Architectures: GPT-2, GPT-NeoX (Pythia), Llama, Qwen-2 and Gemma-2 (``transformers`` class names in
:data:`ARCHITECTURES`); any other is one line naming it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from cbench.errors import UnsupportedModelError

ARCHITECTURES = ("GPT2LMHeadModel", "GPTNeoXForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM",
                 "Gemma2ForCausalLM")


@dataclass
class BridgeModelConfig:
    """The config fields the runtime and the graph read, under TransformerLens 3.9's names."""

    model_name: str
    original_architecture: str
    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    d_vocab: int
    n_ctx: int
    act_fn: str
    normalization_type: str  # "LN" or "RMS"
    positional_embedding_type: str  # "standard" or "rotary"
    rotary_dim: int | None = None
    rotary_adjacent_pairs: bool = False
    n_key_value_heads: int | None = None
    gated_mlp: bool = False
    parallel_attn_mlp: bool = False
    use_normalization_before_and_after: bool = False
    attn_scores_soft_cap: float = -1.0
    output_logits_soft_cap: float = -1.0
    use_local_attn: bool = False
    window_size: int | None = None
    attn_types: list[str] | None = None
    attn_only: bool = False
    attention_dir: str = "causal"
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    tokenizer_prepends_bos: bool = True
    d_vocab_out: int = field(default=-1)

    def __post_init__(self):
        if self.d_vocab_out == -1:
            self.d_vocab_out = self.d_vocab

    def is_layer_norm_activation(self) -> bool:
        return False


class LayerNorm(torch.nn.Module):
    """LayerNorm with weight ``w`` and bias ``b`` (computed in float32, as TransformerLens does)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, eps: float):
        super().__init__()
        self.w = torch.nn.Parameter(weight.detach().clone())
        self.b = torch.nn.Parameter(bias.detach().clone())
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float() if dtype not in (torch.float32, torch.float64) else x
        x = x - x.mean(-1, keepdim=True)
        x = x / (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()
        return (x * self.w + self.b).to(dtype)


class RMSNorm(torch.nn.Module):
    """RMSNorm with weight ``w`` (computed in float32)."""

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.w = torch.nn.Parameter(weight.detach().clone())
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float() if dtype not in (torch.float32, torch.float64) else x
        x = x / (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()
        return (x * self.w).to(dtype)


class PosEmbed(torch.nn.Module):
    """Learned absolute positions ``W_pos [n_ctx, d_model]``: tokens ``[B, P]`` -> ``[B, P, D]``."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.W_pos = torch.nn.Parameter(weight.detach().clone())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.W_pos[: tokens.shape[-1]].expand(*tokens.shape, self.W_pos.shape[-1])


class Attention(torch.nn.Module):
    """One layer's attention weights as the runtime reads them (it computes the attention itself)."""

    def __init__(self, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, attn_scale: float, attn_type: str = "global",
                 rotary=None, rotary_dim: int | None = None):
        super().__init__()
        for name, value in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V), ("W_O", W_O), ("b_Q", b_Q), ("b_K", b_K),
                            ("b_V", b_V), ("b_O", b_O)):
            setattr(self, name, torch.nn.Parameter(value.detach().clone().contiguous()))
        self.attn_scale = float(attn_scale)
        self.attn_type = attn_type
        self.register_buffer("IGNORE", torch.tensor(-torch.inf), persistent=False)
        self._rotary = rotary  # (n) -> (cos [n, r], sin [n, r]) from the checkpoint's rotary module
        self.rotary_dim = rotary_dim
        if rotary is not None:
            cos, sin = rotary(None)
            self.register_buffer("rotary_cos", cos, persistent=False)
            self.register_buffer("rotary_sin", sin, persistent=False)

    def _extend_rotary_embeddings(self, n: int) -> None:
        cos, sin = self._rotary(n)
        self.rotary_cos, self.rotary_sin = cos.to(self.rotary_cos.device), sin.to(self.rotary_sin.device)

    @staticmethod
    def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
        """The rotary partner of each feature, NeoX pairing (halves): ``[-x2, x1]``."""
        n = x.shape[-1] // 2
        return torch.cat([-x[..., n:], x[..., :n]], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, ln1, attn, ln2, mlp, ln1_post=None, ln2_post=None):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = ln1, attn, ln2, mlp
        if ln1_post is not None:
            self.ln1_post, self.ln2_post = ln1_post, ln2_post


class BridgeModel(torch.nn.Module):
    """The runtime's model of a bridge: ``embed``, ``pos_embed`` (GPT-2), ``blocks``, ``ln_final``,
    ``unembed``, ``cfg`` and ``tokenizer``. It has no forward of its own: the runtime
    (``CircuitRuntime(model).clean(tokens)``) computes its outputs."""

    def __init__(self, cfg: BridgeModelConfig, embed, pos_embed, blocks, ln_final, unembed, tokenizer=None):
        super().__init__()
        self.cfg = cfg
        self.embed, self.blocks, self.ln_final, self.unembed = embed, torch.nn.ModuleList(blocks), ln_final, unembed
        if pos_embed is not None:
            self.pos_embed = pos_embed
        self.tokenizer = tokenizer


def is_bridge(model) -> bool:
    """Whether ``model`` is a TransformerLens 4.x ``TransformerBridge`` (by class, no import)."""
    return any(c.__name__ == "TransformerBridge" and c.__module__.startswith("transformer_lens")
               for c in type(model).__mro__)


def from_bridge(bridge, dtype: torch.dtype = torch.float32) -> BridgeModel:
    """The runtime's model of ``bridge`` (its Hugging Face model and tokenizer), on CPU, in
    ``dtype``; one line for a processed bridge or an architecture not in :data:`ARCHITECTURES`."""
    if getattr(bridge, "_weights_processed", False):
        raise UnsupportedModelError(
            "this TransformerBridge's weights were processed (enable_compatibility_mode() or process_weights()): "
            "boot it again and pass it unprocessed (enable_compatibility_mode(no_processing=True) is fine), or pass "
            "the checkpoint directory")
    try:
        hf = bridge.original_model
    except AttributeError as e:
        raise UnsupportedModelError(f"this TransformerBridge has no local torch model ({e})") from None
    return from_hf_model(hf, getattr(bridge, "tokenizer", None), dtype)


def from_hf_model(hf, tokenizer=None, dtype: torch.dtype = torch.float32) -> BridgeModel:
    """The runtime's model of a ``transformers`` causal LM of one of :data:`ARCHITECTURES`."""
    arch = type(hf).__name__
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(f"the runtime does not run a TransformerBridge over {arch} (it runs "
                                    f"{', '.join(ARCHITECTURES)}); pass the checkpoint directory instead")
    c = hf.config
    build = {"GPT2LMHeadModel": _gpt2, "GPTNeoXForCausalLM": _neox}.get(arch, _llama_like)
    with torch.no_grad():
        model = build(hf, c, arch)
        model.tokenizer = tokenizer
        torch.nn.Module.to(model, device="cpu", dtype=dtype)
    model.cfg.dtype = dtype
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _rotary_of(hf, n_ctx: int):
    """``n -> (cos [n, r], sin [n, r])`` from the checkpoint's rotary module, in float32 (``n``
    None: the first ``min(n_ctx, 2048)`` positions; the runtime extends them as it needs)."""
    rot = next(_unwrap(m) for m in hf.modules() if type(_unwrap(m)).__name__.endswith("RotaryEmbedding"))
    rot = _plain_copy(rot).to(device="cpu", dtype=torch.float32)

    def tables(n: int | None):
        n = min(n_ctx, 2048) if n is None else n
        x = torch.zeros(1, n, 1, dtype=torch.float32)
        with torch.no_grad():
            cos, sin = rot(x, torch.arange(n)[None])
        return cos[0].contiguous(), sin[0].contiguous()
    return tables


def _split_heads_in(weight: torch.Tensor, n: int, d_head: int) -> torch.Tensor:
    """A ``Linear`` weight ``[n * d_head, D]`` as ``[n, D, d_head]``."""
    return weight.view(n, d_head, -1).transpose(1, 2)


def _gpt2(hf, c, arch) -> BridgeModel:
    if getattr(c, "scale_attn_by_inverse_layer_idx", False):
        raise UnsupportedModelError("the runtime does not support attention scaled by the inverse layer index "
                                    "(GPT-2's scale_attn_by_inverse_layer_idx)")
    D, H = c.n_embd, c.n_head
    dh = D // H
    cfg = BridgeModelConfig(model_name=str(getattr(c, "_name_or_path", "") or "gpt2"), original_architecture=arch,
                            n_layers=c.n_layer, n_heads=H, d_model=D, d_head=dh, d_mlp=c.n_inner or 4 * D,
                            d_vocab=c.vocab_size, n_ctx=c.n_positions, act_fn=c.activation_function,
                            normalization_type="LN", positional_embedding_type="standard")
    t = _unwrap(hf.transformer)
    blocks = []
    for layer in map(_unwrap, t.h):
        a = _unwrap(layer.attn)
        W, b = _unwrap(a.c_attn).weight, _unwrap(a.c_attn).bias  # Conv1D: [D, 3D], x @ W + b
        Ws = [W[:, i * D:(i + 1) * D].reshape(D, H, dh).permute(1, 0, 2) for i in range(3)]
        bs = [b[i * D:(i + 1) * D].reshape(H, dh) for i in range(3)]
        W_O = _unwrap(a.c_proj).weight.reshape(H, dh, D)
        attn = Attention(*Ws, W_O, *bs, _unwrap(a.c_proj).bias, attn_scale=math.sqrt(dh) if c.scale_attn_weights else 1.0)
        blocks.append(Block(_ln(layer.ln_1), attn, _ln(layer.ln_2), _plain_copy(layer.mlp)))
    return BridgeModel(cfg, _plain_copy(t.wte), PosEmbed(_unwrap(t.wpe).weight), blocks, _ln(t.ln_f),
                       _plain_copy(hf.get_output_embeddings()))


def _neox(hf, c, arch) -> BridgeModel:
    D, H = c.hidden_size, c.num_attention_heads
    dh = D // H
    rotary = _rotary_of(hf, c.max_position_embeddings)
    rotary_dim = int(rotary(1)[0].shape[-1])  # the checkpoint's partial rotary width
    cfg = BridgeModelConfig(model_name=str(getattr(c, "_name_or_path", "") or "gpt-neox"), original_architecture=arch,
                            n_layers=c.num_hidden_layers, n_heads=H, d_model=D, d_head=dh, d_mlp=c.intermediate_size,
                            d_vocab=c.vocab_size, n_ctx=c.max_position_embeddings, act_fn=c.hidden_act,
                            normalization_type="LN", positional_embedding_type="rotary", rotary_dim=rotary_dim,
                            parallel_attn_mlp=bool(c.use_parallel_residual))
    m = _unwrap(hf.gpt_neox)
    blocks = []
    for layer in map(_unwrap, m.layers):
        a = _unwrap(layer.attention)
        # query_key_value: per head, q then k then v (d_head rows each)
        W = _unwrap(a.query_key_value).weight.view(H, 3, dh, D)
        qkv_bias = _unwrap(a.query_key_value).bias
        b = qkv_bias.view(H, 3, dh) if qkv_bias is not None else W.new_zeros(H, 3, dh)
        Ws = [W[:, i].transpose(1, 2) for i in range(3)]
        bs = [b[:, i] for i in range(3)]
        W_O = _unwrap(a.dense).weight.view(D, H, dh).permute(1, 2, 0)
        b_O = _unwrap(a.dense).bias if _unwrap(a.dense).bias is not None else W.new_zeros(D)
        attn = Attention(*Ws, W_O, *bs, b_O, attn_scale=math.sqrt(dh), rotary=rotary, rotary_dim=rotary_dim)
        blocks.append(Block(_ln(layer.input_layernorm), attn, _ln(layer.post_attention_layernorm),
                            _plain_copy(layer.mlp)))
    return BridgeModel(cfg, _plain_copy(m.embed_in), None, blocks, _ln(m.final_layer_norm),
                       _plain_copy(hf.get_output_embeddings()))


def _llama_like(hf, c, arch) -> BridgeModel:
    """Llama, Qwen-2 and Gemma-2: separate q/k/v/o projections, RMSNorm, gated MLP, rotary."""
    gemma = arch == "Gemma2ForCausalLM"
    D, H = c.hidden_size, c.num_attention_heads
    dh = getattr(c, "head_dim", None) or D // H
    kv = c.num_key_value_heads or H
    kinds = list(getattr(c, "layer_types", None) or ["full_attention"] * c.num_hidden_layers)
    local = gemma and "sliding_attention" in kinds
    cfg = BridgeModelConfig(
        model_name=str(getattr(c, "_name_or_path", "") or arch), original_architecture=arch,
        n_layers=c.num_hidden_layers, n_heads=H, d_model=D, d_head=dh, d_mlp=c.intermediate_size,
        d_vocab=c.vocab_size, n_ctx=c.max_position_embeddings,
        act_fn=(getattr(c, "hidden_activation", None) or c.hidden_act) if gemma else c.hidden_act,
        normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=None,
        n_key_value_heads=kv if kv != H else None, gated_mlp=True, use_normalization_before_and_after=gemma,
        attn_scores_soft_cap=float(getattr(c, "attn_logit_softcapping", None) or -1.0) if gemma else -1.0,
        output_logits_soft_cap=float(getattr(c, "final_logit_softcapping", None) or -1.0) if gemma else -1.0,
        use_local_attn=local, window_size=c.sliding_window if local else None,
        attn_types=["local" if k == "sliding_attention" else "global" for k in kinds] if local else None)
    rotary = _rotary_of(hf, cfg.n_ctx)
    cfg.rotary_dim = int(rotary(1)[0].shape[-1])
    scale = math.sqrt(c.query_pre_attn_scalar) if gemma else math.sqrt(dh)
    m = _unwrap(hf.model)
    blocks = []
    for i, layer in enumerate(map(_unwrap, m.layers)):
        a = _unwrap(layer.self_attn)
        rep = H // kv
        Ws = [_split_heads_in(_unwrap(a.q_proj).weight, H, dh)] + [
            _split_heads_in(p.weight, kv, dh).repeat_interleave(rep, 0) for p in map(_unwrap, (a.k_proj, a.v_proj))]
        zeros = _unwrap(a.q_proj).weight.new_zeros
        bs = [_unwrap(a.q_proj).bias.view(H, dh) if _unwrap(a.q_proj).bias is not None else zeros(H, dh)] + [
            p.bias.view(kv, dh).repeat_interleave(rep, 0) if p.bias is not None else zeros(H, dh)
            for p in map(_unwrap, (a.k_proj, a.v_proj))]
        W_O = _unwrap(a.o_proj).weight.view(D, H, dh).permute(1, 2, 0)
        b_O = _unwrap(a.o_proj).bias if _unwrap(a.o_proj).bias is not None else zeros(D)
        attn = Attention(*Ws, W_O, *bs, b_O, attn_scale=scale, rotary=rotary, rotary_dim=cfg.rotary_dim,
                         attn_type="local" if local and kinds[i] == "sliding_attention" else "global")
        if gemma:
            blocks.append(Block(_rms(layer.input_layernorm, c, gemma), attn, _rms(layer.pre_feedforward_layernorm, c, gemma),
                                _plain_copy(layer.mlp), _rms(layer.post_attention_layernorm, c, gemma),
                                _rms(layer.post_feedforward_layernorm, c, gemma)))
        else:
            blocks.append(Block(_rms(layer.input_layernorm, c, gemma), attn,
                                _rms(layer.post_attention_layernorm, c, gemma), _plain_copy(layer.mlp)))
    return BridgeModel(cfg, _plain_copy(m.embed_tokens), None, blocks, _rms(m.norm, c, gemma),
                       _plain_copy(hf.get_output_embeddings()))


def _unwrap(module):
    """The module a bridge component wraps (the bridge puts its components into the Hugging Face
    module tree, each holding the original as ``_original_component``), or ``module``."""
    while module is not None and "_original_component" in module._modules:
        module = module._modules["_original_component"]
    return module


def _plain_copy(module):
    """A copy of a Hugging Face module with every bridge component replaced by the module it
    wraps (no hooks, no reference to the bridge)."""
    module = _unwrap(module)
    children = module._modules
    module._modules = {}
    try:
        new = copy.deepcopy(module)
    finally:
        module._modules = children
    for name, child in children.items():
        new._modules[name] = None if child is None else _plain_copy(child)
    return new


def _ln(module) -> LayerNorm:
    module = _unwrap(module)
    return LayerNorm(module.weight, module.bias, module.eps)


def _rms(module, c, gemma: bool) -> RMSNorm:
    module = _unwrap(module)
    eps = getattr(module, "variance_epsilon", None) or getattr(module, "eps", None) or c.rms_norm_eps
    w = module.weight.float()
    return RMSNorm(1.0 + w if gemma else w, eps)
