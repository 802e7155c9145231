"""Real models by path: random-weight Hugging Face checkpoints in each family's architecture (GPT-2,
Pythia/NeoX, Qwen-2.5, Llama-3.1 with its rope scaling, Gemma-2), saved with a BPE tokenizer
trained here, loaded offline (HF_HUB_OFFLINE=1) by ``cbench discover --model DIR`` and the
Python API, with pairs in the EAP-IG library's CSV layout.

Tolerances (float32): the loaded TransformerLens model's logits within 1e-5 of the checkpoint's
own ``transformers`` forward; the runtime's unpatched pass bit-exact against the loaded model.
"""

from __future__ import annotations

import csv
import json
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import run_main  # noqa: E402

transformers = pytest.importorskip("transformers")

from cbench.api.real_models import discover_model  # noqa: E402
from cbench.artifacts.pretrained import load_model  # noqa: E402
from cbench.discovery import METHODS  # noqa: E402
from cbench.errors import UsageError  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402

torch.set_num_threads(1)
WORDS = "the a cat dog sat on mat and ran to house when Mary John gave book".split()
V = 320


def _configs():
    T = transformers
    return {
        "gpt2": T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64, vocab_size=V),
        "pythia": T.GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                                  rotary_pct=0.25, use_parallel_residual=True, max_position_embeddings=64,
                                  vocab_size=V),
        "qwen2.5": T.Qwen2Config(hidden_size=56, num_attention_heads=7, num_key_value_heads=1, intermediate_size=96,
                                 num_hidden_layers=2, rope_theta=1e6, tie_word_embeddings=True,
                                 max_position_embeddings=64, vocab_size=V),
        "llama3.1": T.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=1, intermediate_size=112,
                                  num_hidden_layers=2, rope_theta=500000.0,
                                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                                  max_position_embeddings=256, vocab_size=V),
        "gemma2": T.Gemma2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                 intermediate_size=64, num_hidden_layers=2, sliding_window=3, query_pre_attn_scalar=12,
                                 max_position_embeddings=64, vocab_size=V),
    }


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    r = random.Random(0)
    corpus = [" ".join(r.choice(WORDS) for _ in range(12)) for _ in range(300)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def write_ioi_pairs(tok, path: Path, n: int, seed: int, n_words: int) -> Path:
    """``n`` IOI-like pairs in the EAP-IG library's CSV layout ("When Mary and John <words> gave a
    book to" against "... Mary and Mary ..."; answers Mary over John), equal token lengths."""
    r = random.Random(seed)
    mary, john = tok(" Mary")["input_ids"][0], tok(" John")["input_ids"][0]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        k = 0
        while k < n:
            words = " ".join(r.choice(WORDS[:12]) for _ in range(n_words))
            clean, corrupted = f"When Mary and John {words} gave a book to", f"When Mary and Mary {words} gave a book to"
            if len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"]):
                w.writerow([clean, corrupted, mary, john])
                k += 1
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{family: checkpoint dir} (weights and tokenizer, made here), and the pairs CSV."""
    root = tmp_path_factory.mktemp("checkpoints")
    tok = _tokenizer()
    dirs = {}
    for i, (family, cfg) in enumerate(_configs().items()):
        torch.manual_seed(i)
        model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
        d = root / family
        model.save_pretrained(d)
        tok.save_pretrained(d)
        dirs[family] = d
    r = random.Random(1)
    path = root / "pairs.csv"
    mary, john = tok(" Mary")["input_ids"], tok(" John")["input_ids"]
    assert len(mary) == len(john) == 1
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        n = 0
        while n < 8:
            words = [r.choice(WORDS[:12]) for _ in range(r.randint(4, 7))]
            clean = "When Mary and John " + " ".join(words) + " gave a book to"
            corrupted = "When Mary and Mary " + " ".join(words) + " gave a book to"
            if len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"]):
                w.writerow([clean, corrupted, mary[0], john[0]])
                n += 1
    return dirs, path


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.mark.parametrize("family", ["gpt2", "pythia", "qwen2.5", "llama3.1", "gemma2"])
def test_a_checkpoint_directory_loads_as_the_checkpoint_computes(checkpoints, family):
    dirs, _ = checkpoints
    hf = transformers.AutoModelForCausalLM.from_pretrained(dirs[family], local_files_only=True).eval()
    model = load_model(dirs[family])
    x = torch.randint(1, V, (3, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref, out = hf(x).logits, model(x)
    assert (out - ref).abs().max() <= 1e-5
    assert model.tokenizer is not None
    assert model.cfg.use_split_qkv_input and model.cfg.use_attn_result
    rt = CircuitRuntime(model)
    assert torch.equal(rt.clean(x), out)


def test_a_directory_named_like_llama_is_read_from_its_own_config(checkpoints, tmp_path):
    """TransformerLens guesses Llama/Gemma from a name; a local directory so named still loads."""
    dirs, _ = checkpoints
    link = tmp_path / "my-llama-copy-of-qwen"
    link.symlink_to(dirs["qwen2.5"])
    assert load_model(link).cfg.n_key_value_heads == 1


@pytest.mark.parametrize("family", ["gpt2", "pythia", "qwen2.5", "llama3.1", "gemma2"])
def test_every_method_runs_on_a_checkpoint_through_the_python_api(checkpoints, family):
    dirs, pairs = checkpoints
    model = load_model(dirs[family])
    for method in sorted(METHODS):
        params = {"steps": 2} if method in ("eap-ig-inputs", "eap-ig-activations", "nap-ig", "sp", "edge-sp", "ugs") else {}
        run = discover_model(model, method, pairs, params=params)
        assert run.result.scores.shape == (run.n_edges,) and torch.isfinite(torch.as_tensor(run.result.scores)).all()
        assert run.data.n_examples == 8 and run.result.metric == "logit_diff"
        assert len(run.document["edges"]) == run.n_edges


@pytest.mark.parametrize("family", ["gpt2", "pythia", "qwen2.5", "llama3.1", "gemma2"])
def test_cli_discover_model_dir(checkpoints, family, tmp_path):
    dirs, pairs = checkpoints
    out = tmp_path / "scores.json"
    r = run_main(["discover", "--model", str(dirs[family]), "--data", str(pairs), "-m", "eap-ig-inputs",
                  "-p", "steps=2", "--out", str(out), "-q"])
    assert r.exception is None and r.code == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["case"] == family and doc["model"]["kind"] == "pretrained"
    assert doc["data"]["n_examples"] == 8 and any(e["score"] != 0 for e in doc["edges"].values())
    # the same scores as the Python API on the same directory
    api = discover_model(dirs[family], "eap-ig-inputs", pairs, params={"steps": 2})
    for name, e in doc["edges"].items():
        assert e["score"] == pytest.approx(api.result.edge_scores()[name], abs=1e-6)


def test_cli_refusals_are_one_line_and_exit_2(checkpoints, tmp_path):
    dirs, pairs = checkpoints
    # Qwen-3: query/key norms, which the runtime does not run
    qwen3 = transformers.AutoModelForCausalLM.from_config(transformers.Qwen3Config(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=64,
        num_hidden_layers=1, max_position_embeddings=64, vocab_size=V)).eval()
    qwen3.save_pretrained(tmp_path / "qwen3")
    transformers.AutoTokenizer.from_pretrained(dirs["gpt2"]).save_pretrained(tmp_path / "qwen3")
    r = run_main(["discover", "--model", str(tmp_path / "qwen3"), "--data", str(pairs), "-m", "eap"])
    assert r.exception is None and r.code == 2, r.stderr
    assert r.error_lines() == [line for line in r.stderr.splitlines() if line.strip()]
    assert "query/key normalization" in r.stderr and "Traceback" not in r.stderr
    for args, words in ((["--model", str(dirs["gpt2"])], "--data"),
                        (["case-3", "--model", str(dirs["gpt2"])], "one of them"),
                        (["--model", str(tmp_path), "--data", str(pairs)], "not a Hugging Face checkpoint"),
                        (["--model", "no-such-org/no-such-model", "--data", str(pairs)], "HF_HUB_OFFLINE")):
        r = run_main(["discover", "-m", "eap", *args])
        assert r.exception is None and r.code == 2, (args, r.stderr)
        assert len(r.error_lines()) == 1 and words in r.stderr, r.stderr


def test_unequal_pairs_and_bad_csv_are_one_line(checkpoints, tmp_path):
    dirs, _ = checkpoints
    bad = tmp_path / "bad.csv"
    bad.write_text("clean,corrupted\nWhen Mary gave,When Mary and John gave a book\n")
    with pytest.raises(UsageError, match="same length"):
        discover_model(dirs["gpt2"], "eap", bad)
    bad.write_text("text\nhello\n")
    with pytest.raises(UsageError, match="clean and corrupted"):
        discover_model(dirs["gpt2"], "eap", bad)


def test_a_run_that_cannot_fit_is_refused_before_it_starts(checkpoints, monkeypatch):
    from cbench.runtime import memory

    dirs, pairs = checkpoints
    model = load_model(dirs["llama3.1"])
    rt = CircuitRuntime(model)
    held, one = memory.run_bytes(rt, 8, 12)
    # the estimate is what the run holds at least: the stacked node outputs the methods keep
    assert held == (2 * rt.n_forward * 64 + 320) * 8 * 12 * 4 and one == memory.row_bytes(rt, 12)
    memory.check_fits(rt, 8, 12, available=held + one)  # fits: nothing said
    with pytest.raises(UsageError, match=r"needs at least .* GB .* use at most 3 pairs \(--n-examples\)"):
        memory.check_fits(rt, 8, 12, available=one + 3.5 * held / 8)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000.0)
    r = run_main(["discover", "--model", str(dirs["llama3.1"]), "--data", str(pairs), "-m", "eap"])
    assert r.exception is None and r.code == 2 and len(r.error_lines()) == 1 and "GB are free" in r.stderr


def test_other_model_objects_are_one_line():
    class TransformerBridge(torch.nn.Module):  # TransformerLens 4.x's class name, not its class
        pass

    # a real bridge loads (tests/test_transformer_lens4_bridge.py); a look-alike is not one
    for obj in (TransformerBridge(), torch.nn.Linear(2, 2)):
        with pytest.raises(UsageError, match="HookedTransformer, a TransformerBridge, a checkpoint directory or a hub name"):
            load_model(obj)
    with pytest.raises(UsageError, match="unknown dtype"):
        load_model("x", dtype="float8")
