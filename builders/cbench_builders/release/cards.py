"""Model and dataset cards: README.md files with YAML front matter, rendered from `cards/`.

Templates are Jinja2 files in the repository's ``cards/`` directory (``<name>.md.j2``). A card is
rendered from a plain dict context; front matter follows Hugging Face conventions (license,
tags, task_categories, size_categories, and for datasets the ``configs:`` block that lets
``load_dataset(repo_or_dir, "case-3")`` work without a loading script).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jinja2

from cbench.errors import BuildError

CARDS_DIR = Path(__file__).resolve().parents[3] / "cards"  # cbench_builders/release/cards.py -> the repository


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(CARDS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson"] = lambda v: json.dumps(v, sort_keys=True)
    env.filters["fmt"] = lambda v, spec=".4g": format(v, spec) if isinstance(v, (int, float)) else str(v)
    return env


def render_card(template: str, context: dict, data_root: str | os.PathLike | None = None) -> str:
    """Render ``cards/<template>.md.j2`` with ``context``; a missing variable is a BuildError.

    The front matter is then rebuilt with ``huggingface_hub``'s card data classes
    (:func:`with_hub_metadata`); ``data_root`` (a dataset's directory) adds ``dataset_info``."""
    context = _model_defaults(template, context)
    try:
        text = _env().get_template(f"{template}.md.j2").render(**context)
        return with_hub_metadata(template, text, context, Path(data_root) if data_root is not None else None)
    except jinja2.TemplateNotFound:
        raise BuildError(f"no card template {template!r} in {CARDS_DIR}") from None
    except jinja2.UndefinedError as exc:
        raise BuildError(f"card template {template!r} needs a value it was not given: {exc}") from None


def render_partial(name: str, context: dict) -> str:
    """Render one shared section, ``cards/<name>.md.j2`` (no front matter), with ``context``."""
    try:
        return _env().get_template(f"{name}.md.j2").render(**context)
    except jinja2.TemplateNotFound:
        raise BuildError(f"no card template {name!r} in {CARDS_DIR}") from None
    except jinja2.UndefinedError as exc:
        raise BuildError(f"card template {name!r} needs a value it was not given: {exc}") from None


def size_category(n_rows: int) -> str:
    """Hugging Face ``size_categories`` bucket for ``n_rows``."""
    for limit, name in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]:
        if n_rows < limit:
            return name
    return "n>10M"


# --------------------------------------------------------------------------- Hub metadata conventions
# Front matter is rebuilt with huggingface_hub's card data classes (ModelCardData, DatasetCardData,
# EvalResult -> model-index), so the Hub and `huggingface_hub.ModelCard.load(...).data` read it the
# way they read any card: `datasets:` links, eval results, `dataset_info`, a default config.

MODEL_TEMPLATES = {"siit_model", "tracr_model", "ioi_model"}
DATASET_TEMPLATES = {"dataset_counterfactuals", "dataset_circuits", "dataset_ioi", "dataset_tracr_programs",
                     "dataset_stress"}
# datasets each kind of model card links to
MODEL_DATASETS = {"siit_model": ["cbench/counterfactuals", "cbench/circuits"],
                  "tracr_model": ["cbench/tracr-programs", "cbench/circuits", "cbench/counterfactuals"],
                  "ioi_model": ["cbench/ioi"]}
# the config a dataset loads when none is named (load_dataset("cbench/circuits"))
DEFAULT_CONFIG = {"dataset_circuits": "case-3", "dataset_counterfactuals": "case-3", "dataset_stress": "stress-or-1"}


def _front_matter(text: str) -> tuple[dict, str]:
    import yaml

    if not text.startswith("---\n"):
        raise BuildError("a card must start with YAML front matter (---)")
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end]) or {}, text[end + 5:]


def _gates(context: dict) -> list[tuple[str, float, str]]:
    """(name, value, pairs) of each release gate, once: from ``meta.json``'s ``gates`` (the value on
    the fresh pairs ``cbench verify`` draws, else on all edges, else on the validation pairs), or
    else from a verify report (object or dict), which lists a gate once per pair set: the last
    value of each name is kept. Listing every pair set's value under one metric type made each
    gate appear twice with different values (issue 47)."""
    meta = context.get("meta") or {}
    gates = meta.get("gates") if isinstance(meta, dict) else None
    out: dict[str, tuple[float, str]] = {}
    if isinstance(gates, dict) and gates:
        for name, g in gates.items():
            if not isinstance(g, dict):
                continue
            for key in ("fresh", "all", "validation"):
                value = g.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[name] = (float(value), key)
                    break
        return [(n, v, k) for n, (v, k) in out.items()]
    report = context.get("verify")
    listed = getattr(report, "gates", None) if report is not None else None
    if listed is None and isinstance(report, dict):
        listed = report.get("gates")
    for g in listed or []:
        name = getattr(g, "name", None) if not isinstance(g, dict) else g.get("name")
        value = getattr(g, "value", None) if not isinstance(g, dict) else g.get("value")
        if isinstance(name, str) and isinstance(value, (int, float)):
            out[name] = (float(value), "verify")
    return [(n, v, k) for n, (v, k) in out.items()]


GATE_PAIRS = {"fresh": "fresh pairs", "all": "every edge", "validation": "validation pairs", "verify": "verify's pairs"}


def model_card_data(template: str, data: dict, context: dict):
    """ModelCardData for a model card: the template's fields plus ``datasets`` and a
    ``model-index`` with the validation metrics and release gates as eval results."""
    from huggingface_hub import EvalResult, ModelCardData

    repo, case, meta = context["repo"], context["case"], context.get("meta") or {}
    results = []
    common = dict(task_type="other", task_name=f"circuit implementation (case {case})",
                  dataset_type="cbench/counterfactuals", dataset_name="cbench counterfactual pairs",
                  dataset_config=f"case-{case}", dataset_split="validation")
    for key, name in (("accuracy", "accuracy"), ("iia", "interchange intervention accuracy (IIA)"),
                      ("siia", "strict interchange intervention accuracy (SIIA)")):
        value = (meta.get("metrics") or {}).get(key)
        if isinstance(value, (int, float)):
            results.append(EvalResult(metric_type=key, metric_name=name, metric_value=float(value), **common))
    exact = (meta.get("exactness") or {}) if isinstance(meta.get("exactness"), dict) else {}
    if template == "tracr_model" and "n_inputs" in exact:
        results.append(EvalResult(metric_type="exact_match", metric_name="agreement with the RASP program",
                                  metric_value=1.0, **dict(common, dataset_split="all inputs checked")))
    for name, value, pairs in _gates(context):
        results.append(EvalResult(metric_type=f"gate/{name}", metric_name=f"release gate: {name} ({GATE_PAIRS[pairs]})",
                                  metric_value=value, **common))
    fields = {k: v for k, v in data.items() if k not in ("datasets", "model-index", "model_name")}
    return ModelCardData(model_name=repo, datasets=MODEL_DATASETS[template], eval_results=results or None, **fields)


def dataset_info(root: Path, configs: list[dict]) -> list[dict]:
    """``dataset_info`` entries (features, splits with sizes) read from the parquet files."""
    import pyarrow.parquet as pq
    from datasets import Features

    out = []
    for c in configs:
        features, splits, size, download = None, [], 0, 0
        for f in c.get("data_files") or []:
            paths = f["path"] if isinstance(f["path"], list) else [f["path"]]
            n, nbytes = 0, 0
            for p in paths:
                pf = pq.ParquetFile(root / p)
                n += pf.metadata.num_rows
                nbytes += sum(pf.metadata.row_group(i).total_byte_size for i in range(pf.metadata.num_row_groups))
                download += (root / p).stat().st_size
                if features is None:
                    features = Features.from_arrow_schema(pf.schema_arrow)._to_yaml_list()
            splits.append({"name": f["split"], "num_bytes": nbytes, "num_examples": n})
            size += nbytes
        if features is not None:
            out.append({"config_name": c["config_name"], "features": features, "splits": splits,
                        "download_size": download, "dataset_size": size})
    return out


def dataset_card_data(template: str, data: dict, data_root: Path | None):
    """DatasetCardData for a dataset card: the template's fields, a default config where one
    makes sense, and ``dataset_info`` when the data files are at hand."""
    from huggingface_hub import DatasetCardData

    fields = dict(data)
    configs = fields.get("configs") or []
    default = DEFAULT_CONFIG.get(template)
    if default and not any(c.get("default") for c in configs):
        for c in configs:
            if c.get("config_name") == default:
                c["default"] = True
    if data_root is not None and configs:
        fields["dataset_info"] = dataset_info(Path(data_root), configs)
    return DatasetCardData(**fields)


def with_hub_metadata(template: str, text: str, context: dict, data_root: Path | None = None) -> str:
    """A rendered card with its front matter rebuilt through huggingface_hub's card data classes."""
    data, body = _front_matter(text)
    if template in MODEL_TEMPLATES:
        card_data = model_card_data(template, data, context)
    elif template in DATASET_TEMPLATES:
        card_data = dataset_card_data(template, data, data_root)
    else:
        return text
    return f"---\n{card_data.to_yaml()}\n---\n{body}"


# model cards with the "Load without cbench" section (cards/_loading.md.j2), which needs an example input
LOADING_TEMPLATES = MODEL_TEMPLATES | {"stress_model", "variables_model"}


def _model_defaults(template: str, context: dict) -> dict:
    """``kind`` and an ``example_input`` (tokens of the vocabulary, BOS and PAD left out) for the
    model cards' shared sections (the stress and variables tiers' cards rendered the loading
    section's example as an empty string before they were given one here)."""
    if template not in LOADING_TEMPLATES:
        return context
    from cbench.artifacts.tokenizer import token_string

    ctx = dict(context)
    meta = ctx.get("meta") or {}
    ctx.setdefault("kind", "tracr")
    ctx.setdefault("example_input", example_input(meta, ctx.get("example_prompt")))
    ctx.setdefault("bos_token", token_string(meta.get("bos_token", "BOS")))
    ctx.setdefault("pad_token", None if meta.get("pad_token") is None else token_string(meta["pad_token"]))
    return ctx


# --------------------------------------------------------------------------- today's form of a released card
# Issue 47: a released card listed each release gate twice (once per pair set) in its model-index, its
# TransformerLens 4.x block reused names the 3.x block imported (whose first line fails under 4.x), and
# the IOI card's example input was three unknown tokens. refresh_card brings a card to today's form.

_SPECIAL_TOKEN = re.compile(r"^<[^<>\s]+>$")
_TEMPLATE_OF_KIND = {"siit": "siit_model", "iit": "siit_model", "tracr": "tracr_model"}


def template_of(meta: dict) -> str | None:
    """The card template a released model's card came from, when it has a model-index (IOI, SIIT,
    IIT and Tracr models; stress and variables cards carry none)."""
    if str(meta.get("case")) == "ioi":
        return "ioi_model"
    return _TEMPLATE_OF_KIND.get(meta.get("model_kind"))


def example_input(meta: dict, prompt: str | None = None) -> str:
    """A card's example input: ``prompt`` (a real input, e.g. the first row of the model's dataset)
    when given, else the first vocabulary words, special tokens (BOS, PAD, ``<unk>``...) left out, as
    many as the shortest input holds (at most 3)."""
    from cbench.artifacts.tokenizer import token_string

    if prompt:
        return prompt
    skip = {meta.get("bos_token"), meta.get("pad_token")}
    words = [token_string(t) for t in meta.get("input_tokens", [])
             if t not in skip and not _SPECIAL_TOKEN.match(str(t))]
    n = max(1, min(int(meta.get("min_seq_len") or 3) - 1, 3, len(words)))
    return " ".join(words[:n])


def loading_section(meta: dict, repo: str, bridge_problem: str | None, prompt: str | None = None) -> str:
    """The card's "Load without cbench" section as today's template writes it."""
    from cbench.artifacts.tokenizer import token_string

    pad = meta.get("pad_token")
    return render_partial("_loading", {"bos_token": token_string(meta.get("bos_token", "BOS")),
                                       "pad_token": None if pad is None else token_string(pad), "repo": repo,
                                       "example_input": example_input(meta, prompt),
                                       "bridge_problem": bridge_problem}).strip()


def model_front_matter(meta: dict) -> str:
    """The YAML front matter (without its ``---`` lines) of a model card no template renders (a SIIT
    counterpart's ``high_level/`` card): Hugging Face's fields as the stress tier's cards write them,
    its tier and mechanism as tags from ``meta.json``."""
    import yaml

    tags = ["mechanistic-interpretability", "circuit-discovery", "cbench"]
    high_level = meta.get("high_level") if isinstance(meta.get("high_level"), dict) else {}
    if meta.get("model_kind") == "stress":
        tags.append("stress-tier")
    if high_level.get("mechanism"):
        tags.append(str(high_level["mechanism"]))
    return yaml.safe_dump({"license": "mit", "library_name": "transformer-lens", "tags": tags,
                           "pipeline_tag": "other"}, sort_keys=False, default_flow_style=False)


def _duplicated_metrics(front: dict) -> bool:
    for entry in front.get("model-index") or []:
        for result in entry.get("results") or []:
            types = [m.get("type") for m in result.get("metrics") or []]
            if len(types) != len(set(types)):
                return True
    return False


def refresh_card(text: str, meta: dict, repo: str, prompt: str | None = None,
                 bridge_problem: str | None = None) -> tuple[str, list[str]]:
    """``text`` (a released model card) in today's form, and what changed (empty: already so):
    the model-index rebuilt from ``meta.json`` with each metric once, the loading section
    re-rendered when its 4.x block does not run alone or its example input is not the one
    :func:`example_input` gives (or added when the card has none), and front matter
    (:func:`model_front_matter`) when the card has none."""
    changes = []
    if not text.startswith("---\n"):  # a card written without front matter (a counterpart's high_level/)
        text = f"---\n{model_front_matter(meta)}---\n{text}"
        changes.append("front matter (license, library, tags), which every model card has")
    front, body = _front_matter(text)
    template = template_of(meta)
    if template and _duplicated_metrics(front):
        data = {k: v for k, v in front.items() if k != "model-index"}
        card_data = model_card_data(template, data, {"repo": repo, "case": meta.get("case"), "meta": meta})
        front_text = card_data.to_yaml()
        changes.append("the model-index lists each metric once: a release gate's value on the fresh pairs "
                       "`cbench verify` draws (it listed each gate once per pair set, with different values)")
    else:
        front_text = text[4:text.index("\n---\n", 4)]
    heading = "## Load without cbench"
    if heading in body:
        start = body.index(heading)
        end = body.find("\n## ", start + len(heading))
        end = len(body) if end < 0 else end + 1
        old = body[start:end].rstrip("\n")
        problem = None
        m = re.search(r"not available for this model\. (.*)", old)
        if m:
            problem = m.group(1).strip()
        new = loading_section(meta, repo, problem, prompt)
        if new != old:
            body = body[:start] + new + "\n\n" + body[end:].lstrip("\n")
            old_example = re.findall(r'to_tokens\("(.*)"\)', old)
            example = example_input(meta, prompt)
            what = []
            if not old_example or old.replace(f'to_tokens("{old_example[0]}")', f'to_tokens("{example}")') != new:
                what.append("the TransformerLens 4.x code runs on its own (it reused names the 3.x block imports)")
            if old_example and old_example[0] != example:
                what.append(f"the example input is {example!r} (it was {old_example[0]!r})")
            changes.append("; ".join(what))
    elif meta.get("input_tokens"):  # a card without the section
        new = loading_section(meta, repo, bridge_problem, prompt)
        i = body.find("\n## Limitations")
        body = (body[:i + 1] + new + "\n\n" + body[i + 1:]) if i >= 0 else body.rstrip("\n") + "\n\n" + new + "\n"
        changes.append("a \"Load without cbench\" section: the model with plain TransformerLens 3.x and 4.x")
    if not changes:
        return text, []
    return f"---\n{front_text.rstrip()}\n---\n{body}", changes
