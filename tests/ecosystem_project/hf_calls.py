"""A second project: what a user with only ``huggingface_hub``, ``datasets`` and TransformerLens
does with cbench's artifacts. It never imports cbench.

Usage: ``HF_ENDPOINT=http://127.0.0.1:PORT python hf_calls.py CBENCH_CACHE WORK_DIR``; prints one
JSON object with what each call returned (run by ``tests/test_ecosystem_project.py``, which
compares it with what huggingface.co answers for the same calls).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def error_name(fn) -> list[str] | None:
    """The names of the classes of the exception ``fn`` raises (its own first), None if none."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the class is the answer
        return [c.__name__ for c in type(exc).__mro__]
    return None


def main(cbench_cache: str, work: str) -> dict:
    import datasets
    from huggingface_hub import HfApi, hf_hub_download, scan_cache_dir, snapshot_download

    api = HfApi(token=False)  # the endpoint comes from HF_ENDPOINT, as for any huggingface_hub user
    out: dict = {"endpoint": api.endpoint}

    info = api.model_info("cbench/case-3")
    out["model_info"] = {"id": info.id, "sha": info.sha, "last_modified": info.last_modified.isoformat(),
                         "siblings": {s.rfilename: [s.size, s.blob_id] for s in info.siblings},
                         "license": info.card_data.license if info.card_data else None}
    out["model_info_at_tag"] = api.model_info("cbench/case-3", revision="v1.0.0").sha
    out["repo_exists"] = [api.repo_exists("cbench/case-3"), api.repo_exists("cbench/no-such-case"),
                          api.repo_exists("cbench/counterfactuals", repo_type="dataset")]
    out["list_models"] = sorted(m.id for m in api.list_models(author="cbench"))
    out["list_datasets"] = sorted(d.id for d in api.list_datasets())
    out["list_repo_commits"] = [[c.commit_id, c.title, c.created_at.isoformat()]
                                for c in api.list_repo_commits("cbench/case-3")]
    out["list_repo_refs"] = sorted(t.name for t in api.list_repo_refs("cbench/case-3").tags)

    dl = hf_hub_download("cbench/case-3", "meta.json", revision="v1.0.0", cache_dir=f"{work}/hf-cache")
    out["hf_hub_download"] = json.loads(Path(dl).read_text())["seed"]
    out["missing_file"] = error_name(lambda: hf_hub_download("cbench/case-3", "no-such-file.txt",
                                                             cache_dir=f"{work}/hf-cache"))
    out["missing_revision"] = error_name(lambda: hf_hub_download("cbench/case-3", "meta.json", revision="v9.9.9",
                                                                 cache_dir=f"{work}/hf-cache"))
    out["missing_revision_info"] = error_name(lambda: api.model_info("cbench/case-3", revision="v9.9.9"))
    out["missing_repo"] = error_name(lambda: api.model_info("cbench/no-such-case"))

    # the cbench cache is a Hugging Face cache: a tag pulled by cbench answers with no server at all
    snap = Path(snapshot_download("cbench/case-3", revision="v1.0.0", local_files_only=True, cache_dir=cbench_cache))
    out["snapshot_local"] = {"commit": snap.name, "files": sorted(p.name for p in snap.iterdir())}
    scan = scan_cache_dir(cbench_cache)
    out["scan_cache_dir"] = {"warnings": [str(w) for w in scan.warnings],
                             "revisions": sorted([r.repo_id, rev.commit_hash, sorted(rev.refs)]
                                                 for r in scan.repos for rev in r.revisions)}

    ds = datasets.load_dataset("cbench/counterfactuals", "case-3", revision="v1.0.0", cache_dir=f"{work}/ds-cache")
    out["load_dataset"] = {split: ds[split].to_list() for split in ds}
    ds2 = datasets.load_dataset("cbench/counterfactuals", "case-3", revision="v1.1.0", cache_dir=f"{work}/ds-cache")
    out["load_dataset_newer"] = {split: ds2[split].to_list() for split in ds2}

    out["transformer_lens"] = hooked_transformer(snap)
    out["imported_cbench"] = any(m == "cbench" or m.startswith("cbench.") for m in sys.modules)
    return out


def hooked_transformer(snap: Path) -> dict:
    """A HookedTransformer from the downloaded files: config.json, model.safetensors, tokenizer.json."""
    import dataclasses

    import torch
    from safetensors.torch import load_file
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformers import PreTrainedTokenizerFast

    raw = json.loads((snap / "config.json").read_text())
    fields = {f.name for f in dataclasses.fields(HookedTransformerConfig)}
    kwargs = {k: v for k, v in raw.items() if k in fields and k not in ("n_params", "device")}
    if isinstance(kwargs.get("dtype"), str):
        kwargs["dtype"] = getattr(torch, kwargs["dtype"].replace("torch.", ""))
    kwargs["tokenizer_name"] = None
    meta = json.loads((snap / "meta.json").read_text())
    bos = str(meta["bos_token"])
    tok = PreTrainedTokenizerFast.from_pretrained(str(snap), bos_token=bos, pad_token=bos, eos_token=bos,
                                                  add_bos_token=True)
    model = HookedTransformer(HookedTransformerConfig(**kwargs), tokenizer=tok, move_to_device=False)
    missing, unexpected = model.load_state_dict(load_file(str(snap / "model.safetensors")), strict=False)
    tokens = model.to_tokens("x a b")
    logits = model(tokens)
    return {"tokens": tokens.tolist(), "str_tokens": model.to_str_tokens(tokens[0]),
            "missing_weights": [k for k in missing if not k.endswith((".mask", ".IGNORE"))],
            "unexpected_weights": list(unexpected), "logits_shape": list(logits.shape)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
