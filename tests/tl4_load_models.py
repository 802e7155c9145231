"""Run under TransformerLens 4.x (the ``.venv-tl4`` interpreter): load released models from their
``bridge/`` files exactly as their cards say, and write their outputs.

Usage: ``python tests/tl4_load_models.py JOBS.json OUT.json``. JOBS is a list of
``{"dir": artifact directory, "bos": str, "pad": str | None, "name": str, "texts": [str, ...]}``;
OUT gets ``{"transformer_lens": version, "results": [{"dir", "tokens": [[...]], "logits": [...]}
| {"dir", "error": str}]}``. Imports neither cbench nor TransformerLens 3.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path


def main(jobs_path: str, out_path: str) -> int:
    from importlib.metadata import version

    import torch
    from safetensors.torch import load_file
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import PreTrainedTokenizerFast

    jobs = json.loads(Path(jobs_path).read_text())
    results = []
    for job in jobs:
        d = job["dir"]
        try:
            pad = job["pad"] or job["bos"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tok = PreTrainedTokenizerFast(tokenizer_file=f"{d}/tokenizer.json", bos_token=job["bos"],
                                              eos_token=pad, pad_token=pad, add_bos_token=True,
                                              name_or_path=job["name"])
                bridge = TransformerBridge.boot_native(json.loads(Path(f"{d}/bridge/config.json").read_text()))
                bridge.tokenizer = tok
                bridge.load_state_dict(load_file(f"{d}/bridge/model.safetensors"))
            bridge.eval()
            tokens, logits = [], []
            for text in job["texts"]:
                t = bridge.to_tokens(text)
                with torch.no_grad():
                    out = bridge(t)
                tokens.append(t[0].tolist())
                logits.append(out[0].tolist())
            results.append({"dir": d, "tokens": tokens, "logits": logits})
        except Exception as exc:  # noqa: BLE001 - reported per model to the test
            results.append({"dir": d, "error": f"{type(exc).__name__}: {exc}"})
    Path(out_path).write_text(json.dumps({"transformer_lens": version("transformer-lens"), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
