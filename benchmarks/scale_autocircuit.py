"""One auto-circuit measurement for ``bench_scale.py``, run with the python of the venv that
script creates (auto-circuit from PyPI; this file imports nothing of cbench).

Usage: ``python scale_autocircuit.py SIZE_DIR METHODS REPEAT DEVICE TIMEOUT``; METHODS is a
comma-separated list of ``eap``
(``mask_gradient_prune_scores`` at mask value 0, i.e. EAP), ``eap-ig`` (the same with 5
integrated-gradient samples of the mask value), ``acdc`` (``acdc_prune_scores`` with one
threshold, 1e-3) or ``edge-sp`` (``subnetwork_probing_prune_scores``, batches of 32 pairs,
34 epochs of 3 batches: about the 100 steps of cbench's SP), run in this order in this one
process; each prints one JSON line (``scale_measure.measure``: wall and CPU time, best of
REPEAT; peak memory over the RSS before the call; TIMEOUT seconds per method). The model is the
size's ``config.json`` + ``model.safetensors`` (the same weights cbench runs), the pairs its
``pairs.safetensors``; auto-circuit scores the last position (``slice_output="last_seq"``)
against the clean model's answer there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path


def load(d: Path, device):
    import torch
    from safetensors.torch import load_file
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    raw = json.loads((d / "config.json").read_text())
    fields = {f.name for f in dataclasses.fields(HookedTransformerConfig)}
    kw = {k: v for k, v in raw.items() if k in fields}  # None included: e.g. no normalization
    for k in ("dtype",):
        if isinstance(kw.get(k), str):
            kw[k] = getattr(torch, kw[k].removeprefix("torch."))
    for k in ("tokenizer_name", "model_name", "original_architecture", "n_params", "n_devices", "device",
              "use_attn_result", "use_split_qkv_input", "use_hook_mlp_in", "use_attn_in", "init_weights"):
        kw.pop(k, None)
    cfg = HookedTransformerConfig(**kw, device=str(device), use_attn_result=True, use_split_qkv_input=True,
                                  use_hook_mlp_in=not raw.get("attn_only", False), init_weights=False)
    model = HookedTransformer(cfg)
    sd = load_file(d / "model.safetensors")
    params = dict(model.named_parameters())
    lost = [k for k in params if k not in sd or sd[k].shape != params[k].shape]
    if lost:
        raise SystemExit(f"auto-circuit's TransformerLens has parameters the model file lacks: {lost[:4]}")
    model.load_state_dict({k: sd[k] for k in params}, strict=False)  # buffers (masks) are its own
    model.to(device).eval()
    pairs = load_file(d / "pairs.safetensors")
    return model, pairs, raw


def main():
    d, methods, repeat, device, timeout = (Path(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]),
                                           sys.argv[4], float(sys.argv[5]))
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scale_measure import emit, measure

    torch.set_num_threads(int(os.environ.get("CBENCH_THREADS", "1")))
    from auto_circuit.data import PromptDataLoader, PromptDataset
    from auto_circuit.prune_algos.ACDC import acdc_prune_scores
    from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
    from auto_circuit.prune_algos.subnetwork_probing import subnetwork_probing_prune_scores
    from auto_circuit.utils.graph_utils import patchable_model

    dev = torch.device(device)
    model, pairs, raw = load(d, dev)
    base, source, answers = pairs["base"].to(dev), pairs["source"].to(dev), pairs["answers"][:, -1]
    V = model.cfg.d_vocab_out
    ans = [answers[i:i + 1].to(dev) for i in range(len(answers))]
    wrong = [((answers[i:i + 1] + 1) % max(V, 1)).to(dev) for i in range(len(answers))]
    ds = PromptDataset(base, source, ans, wrong)
    N = base.shape[0]
    full = PromptDataLoader(ds, seq_len=None, diverge_idx=0, batch_size=N, shuffle=False)
    sp_batch = min(32, N)
    sp_loader = PromptDataLoader(ds, seq_len=None, diverge_idx=0, batch_size=sp_batch, shuffle=False)
    epochs = -(-100 // max(1, N // sp_batch))
    pm = patchable_model(model, factorized=True, slice_output="last_seq", separate_qkv=True, device=dev)
    grad_fn = "logit" if V == 1 else "logprob"

    def call(method):
        if method == "eap":
            return mask_gradient_prune_scores(pm, full, None, grad_function=grad_fn, answer_function="avg_val",
                                              mask_val=0.0)
        if method == "eap-ig":
            return mask_gradient_prune_scores(pm, full, None, grad_function=grad_fn, answer_function="avg_val",
                                              integrated_grad_samples=5)
        if method == "acdc":
            return acdc_prune_scores(pm, full, None, tao_exps=[-3], tao_bases=[1],
                                     faithfulness_target="mse" if V == 1 else "kl_div")
        if method == "edge-sp":
            return subnetwork_probing_prune_scores(pm, sp_loader, None, learning_rate=0.1, epochs=epochs,
                                                   faithfulness_target="mse" if V == 1 else "kl_div")
        raise SystemExit(f"unknown auto-circuit method {method!r}")

    for method in methods:
        r = measure(lambda method=method: call(method), repeat, timeout, cuda=dev.type == "cuda")
        emit(method, dict(r, n_edges=int(pm.n_edges)))


if __name__ == "__main__":
    main()
