"""Every released model, at its newest version, built from its files with plain TransformerLens 3.x
(``HookedTransformerConfig(**config)``, ``HookedTransformer(cfg)``, the safetensors state dict, the
tokenizer from ``tokenizer.json``; no cbench loader) gives cbench's loader's outputs, with BOS at
position 0 from ``to_tokens`` on a string.

The default suite checks a sample (every kind of model: SIIT, IIT, Tracr, stress, IOI, and the
Tracr sub-artifacts); ``-m slow`` checks all of them. The TransformerLens 4 native form
(``bridge/``) is checked against the same outputs with a torch re-implementation of the native
forward pass here, and with TransformerLens 4.3 itself in ``test_transformer_lens4.py``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from cbench.artifacts.model import read_model_artifact
from cbench.hub.repos import sort_versions

ZOO = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"


def newest_versions() -> list[Path]:
    """The newest release of every cbench model artifact (plain Hugging Face checkpoint
    repositories such as cbench/lm-tiny have no meta.json and no TransformerLens form: their own
    test is tests/test_lm_release.py)."""
    out = []
    for repo in sorted(p for p in ZOO.iterdir() if p.is_dir()):
        versions = [p.name for p in repo.iterdir() if p.is_dir() and not p.name.startswith(".")]
        newest = repo / sort_versions(versions)[-1]
        if (newest / "meta.json").is_file():
            out.append(newest)
    return out


ALL = newest_versions()
# one of each kind, the case from the bug report, bidirectional ones and numerical ones
SAMPLE_NAMES = {"case-3", "case-13", "iit-case-3", "tracr-case-2", "tracr-case-3", "stress-and-1", "stress-dist-2",
                "ioi", "case-101", "iit-case-21", "var-shared-1", "var-spread-2"}
SAMPLE = [p for p in ALL if p.parent.name in SAMPLE_NAMES]


def artifact_dirs(version_dir: Path) -> list[Path]:
    return [version_dir] + sorted(p for p in version_dir.iterdir() if p.is_dir() and (p / "meta.json").is_file())


def example_texts(meta: dict, n_ctx: int) -> list[str]:
    """A few inputs as text: words of the vocabulary (BOS and PAD left out) of lengths that fit."""
    from cbench.artifacts.tokenizer import token_string

    skip = {meta.get("bos_token"), meta.get("pad_token")}
    words = [token_string(t) for t in meta["input_tokens"] if t not in skip]
    longest = max(1, min(n_ctx - 1, int(meta.get("max_seq_len") or n_ctx) - 1, 6))
    if "dataset" in meta and isinstance(meta.get("dataset"), dict) and meta["dataset"].get("split_pattern"):
        longest = min(longest, 6)
    gen = torch.Generator().manual_seed(0)
    texts = []
    for length in sorted({1, max(1, longest // 2), longest}):
        idx = torch.randint(0, len(words), (length,), generator=gen).tolist()
        texts.append(" ".join(words[i] for i in idx))
    return texts


def plain_tl3(art_dir: Path, drop_dtype: bool = False):
    """The model exactly as the card's "Load without cbench" section builds it."""
    from safetensors.torch import load_file
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformers import PreTrainedTokenizerFast

    config = json.loads((art_dir / "config.json").read_text())
    if drop_dtype:  # versions before the re-release: docs/loading.md's "Older versions"
        config.pop("dtype", None)
    meta = json.loads((art_dir / "meta.json").read_text())
    bos = str(meta["bos_token"])
    pad = bos if meta.get("pad_token") is None else str(meta["pad_token"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = PreTrainedTokenizerFast(tokenizer_file=str(art_dir / "tokenizer.json"), bos_token=bos, eos_token=pad,
                                      pad_token=pad, add_bos_token=True, name_or_path=f"cbench/{art_dir.name}")
        model = HookedTransformer(HookedTransformerConfig(**config))
        model.load_state_dict(load_file(art_dir / "model.safetensors"), strict=False)
        model.set_tokenizer(tok)
    return model.eval()


def check_model(art_dir: Path) -> None:
    from cbench.artifacts.native_bridge import to_native

    art = read_model_artifact(art_dir)
    assert art.config["default_prepend_bos"] is True, f"{art_dir}: config.json still says default_prepend_bos false"
    ours = art.load_model()
    theirs = plain_tl3(art_dir)
    native = to_native(art.config, art.state_dict())
    for text in example_texts(art.meta, art.config["n_ctx"]):
        tokens = theirs.to_tokens(text)
        assert tokens[0, 0].item() == 0, f"{art_dir}: to_tokens({text!r}) = {tokens.tolist()} lost BOS"
        assert torch.equal(tokens, ours.to_tokens(text)), f"{art_dir}: tokens differ for {text!r}"
        assert tokens.shape[1] == len(text.split()) + 1 or "split_pattern" in str(art.meta.get("dataset"))
        with torch.no_grad():
            want, got = ours(tokens), theirs(tokens)
            bridged = native_forward(native, tokens)
        tol = 1e-4 + 1e-5 * want.abs().max().item()
        assert want.shape == got.shape
        assert (want - got).abs().max().item() <= tol, f"{art_dir}: plain TransformerLens differs on {text!r}"
        assert (want - bridged).abs().max().item() <= tol, f"{art_dir}: the bridge/ form differs on {text!r}"


def native_forward(native, tokens: torch.Tensor) -> torch.Tensor:
    """TransformerLens 4.3's native model (``transformer_lens/model_bridge/sources/native/model.py``) on
    the bridge's state dict, re-written with torch for the features cbench's models use: no norms,
    learned positions, causal or bidirectional attention divided by ``attn_scale``, a two-layer MLP,
    an unembedding with bias. ``test_transformer_lens4.py`` runs TransformerLens 4.3 itself."""
    import torch.nn.functional as F

    c, w = native.config, native.state_dict
    acts = {"gelu": F.gelu, "gelu_new": lambda x: F.gelu(x, approximate="tanh"), "relu": F.relu, "silu": F.silu}
    batch, seq = tokens.shape
    h = w["embed.weight"][tokens] + w["pos_embed.weight"][torch.arange(seq)][None]
    n_heads, d_head = c["n_heads"], c["d_head"]
    for layer in range(c["n_layers"]):
        p = f"blocks.{layer}"
        q, k, v = (F.linear(h, w[f"{p}.attn.{n}.weight"], w[f"{p}.attn.{n}.bias"])
                   .view(batch, seq, n_heads, d_head).transpose(1, 2) for n in "qkv")
        scores = q @ k.transpose(-2, -1) / c["attn_scale"]
        if c["attention_dir"] == "causal":
            scores = scores.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1), float("-inf"))
        z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, n_heads * d_head)
        h = h + F.linear(z, w[f"{p}.attn.o.weight"], w[f"{p}.attn.o.bias"])
        if not c["attn_only"]:
            mid = acts[c["act_fn"]](F.linear(h, w[f"{p}.mlp.in.weight"], w[f"{p}.mlp.in.bias"]))
            h = h + F.linear(mid, w[f"{p}.mlp.out.weight"], w[f"{p}.mlp.out.bias"])
    return F.linear(h, w["unembed.weight"], w["unembed.bias"])


def test_sample_covers_every_kind():
    kinds = {json.loads((p / "meta.json").read_text())["model_kind"] for p in SAMPLE}
    assert kinds == {json.loads((p / "meta.json").read_text())["model_kind"] for p in ALL}
    assert len(ALL) >= 250


def test_every_released_model_and_sub_artifact_is_in_todays_form():
    """The files-only part of the slow check, over every newest release and every sub-artifact
    (a new release that copies an old-form Tracr sub-artifact in is caught here, in the default
    suite): BOS on in config.json, no dtype string, the tokenizer files, and the TransformerLens 4
    form unless the card says why there is none."""
    problems = []
    for version_dir in ALL:
        for art in artifact_dirs(version_dir):
            meta = json.loads((art / "meta.json").read_text())
            config = json.loads((art / "config.json").read_text())
            if meta.get("bos_token") is not None and config.get("default_prepend_bos") is not True:
                problems.append(f"{art}: config.json does not say default_prepend_bos true")
            if "dtype" in config:
                problems.append(f"{art}: config.json has a dtype string")
            if not (art / "tokenizer.json").is_file() or not (art / "tokenizer_config.json").is_file():
                problems.append(f"{art}: no tokenizer files")
            if not (art / "bridge" / "config.json").is_file() and "TransformerLens 4" not in (
                    (art / "README.md").read_text(encoding="utf-8") if (art / "README.md").is_file() else ""):
                problems.append(f"{art}: no bridge/ and no word on TransformerLens 4 in its card")
    assert not problems, f"{len(problems)} problems (re-release with `cbench build re-release --only NAME`): " \
        + "; ".join(problems[:10])


@pytest.mark.parametrize("version_dir", SAMPLE, ids=lambda p: f"{p.parent.name}@{p.name}")
def test_released_model_loads_with_plain_transformer_lens(version_dir):
    for art_dir in artifact_dirs(version_dir):
        check_model(art_dir)


@pytest.mark.slow
def test_every_released_model_loads_with_plain_transformer_lens():
    failures = []
    for version_dir in ALL:
        for art_dir in artifact_dirs(version_dir):
            try:
                check_model(art_dir)
            except AssertionError as exc:
                failures.append(str(exc).splitlines()[0])
    assert not failures, f"{len(failures)} models fail: " + "; ".join(failures[:10])


def test_the_old_config_strips_bos_and_gives_other_outputs():
    """The bug the re-release fixes, on the version before it (still pullable): case-3@v2.1.0's
    config says default_prepend_bos false, so to_tokens drops the declared BOS."""
    old = ZOO / "case-3" / "v2.1.0"
    model = plain_tl3(old, drop_dtype=True)
    assert model.to_tokens("x a b").tolist() == [[4, 1, 2]]
    fixed = plain_tl3(newest_versions()[[p.parent.name for p in ALL].index("case-3")])
    assert fixed.to_tokens("x a b").tolist() == [[0, 4, 1, 2]]
    with torch.no_grad():
        right = fixed(fixed.to_tokens("x a b"))[0, :, 0]
    assert torch.allclose(right, torch.tensor([-0.560, 1.003, 0.506, 0.334]), atol=2e-3)
