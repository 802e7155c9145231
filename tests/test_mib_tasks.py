"""MIB's circuit-track tasks and a user's own pairs, on real files.

Fixtures are written in MIB's dataset layout (``mib-bench/ioi``, ``copycolors_mcqa``,
``arithmetic_addition``, ``arc_easy``: a few rows each, some that MIB's filter drops), saved as a
Hugging Face dataset (``save_to_disk``) and, for IOI, as a downloaded dataset repository (Parquet
files). cbench's loader must equal a small reimplementation, written here from the rules of
``HFEAPDataset`` (MIB_circuit_track/dataset.py) and EAP-IG's ``tokenize_plus`` (BOS prepended,
padding on the right); MIB's metric (``logit_diff`` at ``input_length - 1``) computed on the
``transformers`` forward of a random-weight GPT-2 checkpoint must equal cbench's metric on the
model cbench loads (within 1e-4, float32). A user's JSONL with a bad row is one message naming
the row, exit 2.
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
datasets = pytest.importorskip("datasets")

from cbench.api.real_models import read_task, resolve_model  # noqa: E402
from cbench.errors import UsageError  # noqa: E402
from cbench.tasks.metrics import logit_diff, logit_diffs  # noqa: E402
from cbench.tasks.mib_tasks import load_mib_task, parse_task_spec  # noqa: E402
from cbench.tasks.pairs_file import read_pairs_file  # noqa: E402

torch.set_num_threads(1)
V = 512
NAMES = ["Mary", "John", "Anna", "Tom", "Lisa"]


def ioi_row(io, s, c, place):
    """A row of mib-bench/ioi: the prompt, its names in ``metadata``, the two answers as
    ``choices``/``answerKey``, and each counterfactual with the same fields."""
    def block(prompt, io_, s_):
        return {"prompt": prompt, "choices": [io_, s_], "answerKey": 0,
                "metadata": {"indirect_object": io_, "subject": s_, "random_c": c, "place": place}}

    row = block(f"When {io} and {s} went to the {place}, {s} gave a book to", io, s)
    row["s2_io_flip_counterfactual"] = block(f"When {io} and {s} went to the {place}, {io} gave a book to", s, io)
    row["abc_counterfactual"] = block(f"When {c} and {io} went to the {place}, {s} gave a book to", io, s)
    return row


def choices_row(question, texts, key, cf_labels):
    labels = ["A", "B", "C", "D"]
    body = " ".join(f"{lab}. {t}" for lab, t in zip(labels, texts))
    cf_body = " ".join(f"{lab}. {t}" for lab, t in zip(cf_labels, texts))
    return {"prompt": f"{question} {body} Answer:", "choices": {"label": labels, "text": texts}, "answerKey": key,
            "symbol_counterfactual": {"prompt": f"{question} {cf_body} Answer:",
                                      "choices": {"label": cf_labels, "text": texts}, "answerKey": key}}


def arith_row(a, b, op, cf):
    val = a + b if op == "+" else a - b
    row = {"prompt": f"{a}{op}{b}=", "label": val, "operator": op, "num_digit": 2}
    row["random_counterfactual"] = None if cf is None else {"prompt": f"{cf[0]}{op}{cf[1]}=",
                                                           "label": cf[0] + cf[1] if op == "+" else cf[0] - cf[1]}
    return row


IOI_ROWS = [ioi_row("Mary", "John", "Anna", "store"), ioi_row("Tom", "Lisa", "Mary", "park"),
            ioi_row("Anna", "Tom", "Zzyzxq", "store"),  # MIB drops it: " Zzyzxq" is several tokens
            ioi_row("Lisa", "Mary", "John", "park")]
MCQA_ROWS = [choices_row("The banana is yellow. What color is the banana?", ["red", "yellow", "blue", "green"], 1,
                         ["B", "A", "C", "D"]),
             choices_row("The sky is blue. What color is the sky?", ["blue", "red", "green", "yellow"], 0,
                         ["QZX", "B", "C", "D"]),  # MIB drops it: the counterfactual label is several tokens
             choices_row("The grass is green. What color is the grass?", ["red", "blue", "green", "yellow"], 2,
                         ["A", "B", "D", "C"])]
ARC_ROWS = [choices_row("Which one is a star?", ["the sun", "a rock", "a tree", "the sea"], 0, ["B", "A", "C", "D"]),
            choices_row("Which one is water?", ["a rock", "the sea", "the sun", "a tree"], 1, ["A", "C", "B", "D"]),
            choices_row("Which one is a tree?", ["a tree", "a rock", "the sun", "the sea"], 0,
                        ["QZX", "A", "C", "D"])]  # dropped: the counterfactual label is several tokens
ARITH_ROWS = [arith_row(12, 34, "+", (21, 43)), arith_row(23, 41, "+", (12, 12)),
              arith_row(45, 30, "-", (34, 12)),  # another operator: dropped from addition
              arith_row(12, 12, "+", None),  # no counterfactual: dropped
              arith_row(21, 43, "+", (12, 34))]
FIXTURES = {"ioi": IOI_ROWS, "copycolors_mcqa": MCQA_ROWS, "arc_easy": ARC_ROWS, "arithmetic_addition": ARITH_ROWS}
TASK_OF = {"ioi": "ioi", "mcqa": "copycolors_mcqa", "arc": "arc_easy", "arithmetic": "arithmetic_addition"}


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = []
    for rows in FIXTURES.values():
        for row in rows:
            texts.append(row["prompt"])
            for v in row.values():
                if isinstance(v, dict) and "prompt" in v:
                    texts.append(v["prompt"])
    texts = [t for t in texts if "Zzyzxq" not in t and "QZX" not in t]  # these stay several tokens
    texts += [f" {n}" for n in NAMES] + ["A B C D"] + ["46", "64", "24", "15", "22"]
    tok.train_from_iterator(texts * 40, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(checkpoint dir, tokenizer, MIB data root, hub-snapshot root)."""
    root = tmp_path_factory.mktemp("mib")
    tok = _tokenizer()
    # the fixtures mean what they claim: kept answers one token, the dropped ones several
    assert all(len(tok(f" {n}")["input_ids"]) == 1 for n in NAMES) and len(tok(" Zzyzxq")["input_ids"]) > 1
    assert len(tok("QZX")["input_ids"]) > 1 and all(len(tok(x)["input_ids"]) == 1 for x in ("46", "64", "24"))
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64, vocab_size=V)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ckpt = root / "gpt2-tiny"
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    data = root / "data"
    for name, rows in FIXTURES.items():
        ds = datasets.Dataset.from_list(rows)
        datasets.DatasetDict({"train": ds, "validation": ds.select(range(2))}).save_to_disk(str(data / name))
    hub = root / "hub" / "ioi" / "data"  # a downloaded dataset repository's layout
    hub.mkdir(parents=True)
    datasets.Dataset.from_list(IOI_ROWS).to_parquet(str(hub / "train-00000-of-00001.parquet"))
    return ckpt, tok, data, root / "hub"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("CBENCH_MIB_DATA", raising=False)


# --- a reimplementation from MIB's code (HFEAPDataset.filter_dataset / __getitem__) -------------
def mib_reference(task, rows, tok, cf):
    def n_tok(text):
        return len(tok(text, add_special_tokens=False).input_ids)

    def first(text):
        return tok(text, add_special_tokens=False).input_ids[0]

    out = []
    for row in rows:
        if task == "ioi":
            m = row["metadata"]
            if not n_tok(f" {m['indirect_object']}") == n_tok(f" {m['subject']}") == n_tok(f" {m['random_c']}"):
                continue
            item = (row["prompt"], row[cf]["prompt"], [first(f" {m['indirect_object']}"), first(f" {m['subject']}")])
        elif task in ("mcqa", "arc"):
            if n_tok(row["choices"]["label"][row["answerKey"]]) != n_tok(str(row[cf]["choices"]["label"][row[cf]["answerKey"]])):
                continue
            item = (row["prompt"], row[cf]["prompt"], [first(row["choices"]["label"][row["answerKey"]]),
                                                       first(str(row[cf]["choices"]["label"][row[cf]["answerKey"]]))])
        else:
            rc = row["random_counterfactual"]
            if not (n_tok(str(row["label"])) == 1 and rc is not None and rc["prompt"] is not None
                    and row["operator"] == "+" and n_tok(str(rc["label"])) == 1):
                continue
            item = (row["prompt"], rc["prompt"], [first(str(row["label"])), first(str(rc["label"]))])
        out.append(item)
    return out


def to_tokens(tok, texts):
    """TransformerLens's to_tokens(prepend_bos=True, padding_side='right') as EAP-IG's tokenize_plus."""
    ids = [[tok.bos_token_id] + tok(t, add_special_tokens=False).input_ids for t in texts]
    P = max(map(len, ids))
    x = torch.full((len(ids), P), tok.pad_token_id or 0, dtype=torch.long)
    for i, row in enumerate(ids):
        x[i, :len(row)] = torch.tensor(row)
    return x, torch.tensor([len(r) for r in ids])


@pytest.mark.parametrize("task,cf", [("ioi", "s2_io_flip_counterfactual"), ("ioi", "abc_counterfactual"),
                                     ("mcqa", "symbol_counterfactual"), ("arc", "symbol_counterfactual"),
                                     ("arithmetic", "random_counterfactual")])
def test_loader_equals_mibs_rules(world, task, cf):
    _ckpt, tok, data, _hub = world
    rows = FIXTURES[TASK_OF[task]]
    ref = mib_reference(task, rows, tok, cf)
    spec = task if cf.startswith(("s2_", "symbol", "random")) else f"{task}:train:{cf.removesuffix('_counterfactual')}"
    got = load_mib_task(spec, tok, data_dir=data)
    assert got.n_examples == len(ref) and len(ref) < len(rows)  # MIB's filter dropped rows here
    clean, clean_len = to_tokens(tok, [r[0] for r in ref])
    corrupt, _ = to_tokens(tok, [r[1] for r in ref])
    assert torch.equal(got.base, clean) and torch.equal(got.source, corrupt)
    assert got.labels.tolist() == [r[2] for r in ref]
    # the answer position: each row's last real token (MIB's input_length - 1)
    last = (torch.arange(got.valid.shape[1]) * got.valid).argmax(-1)
    assert torch.equal(last, clean_len - 1)
    assert got.info["mib_filtered"] == len(rows) - len(ref) and got.info["counterfactual"] == cf


def test_splits_head_and_hub_repository_layout(world):
    _ckpt, tok, data, hub = world
    val = load_mib_task("ioi:validation", tok, data_dir=data)
    assert val.n_examples == 2 and val.split == "validation"
    assert load_mib_task("ioi", tok, 1, data_dir=data).n_examples == 1  # MIB's head, after its filter
    from_hub = load_mib_task("ioi", tok, data_dir=hub)
    from_disk = load_mib_task("ioi", tok, data_dir=data)
    assert torch.equal(from_hub.base, from_disk.base) and torch.equal(from_hub.labels, from_disk.labels)
    assert parse_task_spec("arithmetic").task.name == "arithmetic-addition"
    assert parse_task_spec("arc_challenge").task.dataset == "arc_challenge" and parse_task_spec("x.jsonl") is None


def test_mibs_metric_equals_the_reference_on_a_checkpoint(world, monkeypatch):
    ckpt, tok, data, _hub = world
    monkeypatch.setenv("CBENCH_MIB_DATA", str(data))
    hf = transformers.GPT2LMHeadModel.from_pretrained(ckpt).eval()
    for task in ("ioi", "mcqa", "arithmetic"):
        rm = resolve_model(ckpt, task)
        ref = mib_reference(task, FIXTURES[TASK_OF[task]], tok, rm.data.info["counterfactual"])
        x, length = to_tokens(tok, [r[0] for r in ref])
        with torch.no_grad():
            logits = hf(x, attention_mask=(torch.arange(x.shape[1]) < length[:, None]).long()).logits
            out = rm.runtime.clean(rm.data.base)
        at = logits[torch.arange(len(ref)), length - 1]  # MIB's get_logit_positions
        labels = torch.tensor([r[2] for r in ref])
        good_bad = at.gather(-1, labels)
        want = good_bad[:, 0] - good_bad[:, 1]
        got = logit_diffs(out, rm.data.labels, rm.data.valid)
        assert rm.answer_metric == "logit_diff"
        assert torch.allclose(got, want, atol=1e-4), (task, got, want)
        assert float(logit_diff(out, rm.data.labels, rm.data.valid)) == pytest.approx(-float(want.mean()), abs=1e-4)


def test_missing_mib_data_is_one_line(world, tmp_path, monkeypatch):
    _ckpt, tok, _data, _hub = world
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # read when datasets was imported
    with pytest.raises(UsageError, match="MIB's mcqa data is not in .*copycolors_mcqa"):
        load_mib_task("mcqa", tok, data_dir=tmp_path)
    with pytest.raises(UsageError, match=r"not readable in the Hugging Face cache.*CBENCH_MIB_DATA"):
        load_mib_task("arc", tok)
    with pytest.raises(UsageError, match="no column 'nope_counterfactual'.*symbol_counterfactual"):
        load_mib_task("mcqa:train:nope", tok, data_dir=_data)
    with pytest.raises(UsageError, match="no split 'test'"):
        load_mib_task("ioi:test", tok, data_dir=_data)


# --- a user's own pairs ---------------------------------------------------------------------------
def _user_rows(tok):
    mary, john = tok(" Mary")["input_ids"][0], tok(" John")["input_ids"][0]
    pairs = [(r["prompt"], r["s2_io_flip_counterfactual"]["prompt"]) for r in IOI_ROWS]
    return [{"clean": c, "corrupted": k, "correct": " Mary", "incorrect": " John",
             "correct_idx": mary, "incorrect_idx": john} for c, k in pairs]


def test_user_layouts_read_the_same(world, tmp_path):
    _ckpt, tok, _data, _hub = world
    rows = _user_rows(tok)
    with open(tmp_path / "p.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["clean", "corrupted", "correct_idx", "incorrect_idx"])
        w.writeheader()
        w.writerows({k: r[k] for k in w.fieldnames} for r in rows)
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({k: r[k] for k in ("clean", "corrupted", "correct",
                                                                              "incorrect")}) + "\n" for r in rows))
    ds = datasets.Dataset.from_list([{k: r[k] for k in ("clean", "corrupted", "correct_idx", "incorrect_idx")}
                                     for r in rows])
    ds.to_parquet(str(tmp_path / "p.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    ref = read_pairs_file(tmp_path / "p.csv", tok)
    assert ref.labels.tolist() == [[r["correct_idx"], r["incorrect_idx"]] for r in rows]
    for name in ("p.jsonl", "p.parquet", "saved"):
        got = read_task(str(tmp_path / name), tok)
        assert torch.equal(got.base, ref.base) and torch.equal(got.source, ref.source), name
        assert torch.equal(got.labels, ref.labels) and torch.equal(got.valid, ref.valid), name


BAD_ROWS = [
    ({"clean": "When Mary and John went", "corrupted": "When Mary went", "correct": " Mary", "incorrect": " John"},
     r"p.jsonl: row 3: clean has \d+ tokens, corrupted \d+ \(a pair must have the same length\)"),
    ({"clean": "When Mary and John went", "corrupted": "When Mary and Mary went", "correct": "", "incorrect": " John"},
     "p.jsonl: row 3: correct is empty"),
    ({"clean": "When Mary and John went", "corrupted": "When Mary and Mary went", "correct": " Zzyzxq",
      "incorrect": " John"}, r"p.jsonl: row 3: correct ' Zzyzxq' is \d+ tokens"),
    ({"clean": "When Mary and John went", "corrupted": "When Mary and Mary went", "correct_idx": 5,
      "incorrect_idx": V + 7}, rf"p.jsonl: row 3: incorrect {V + 7} is outside the vocabulary \(0..{V - 1}\)"),
]


@pytest.mark.parametrize("bad,message", BAD_ROWS, ids=["unequal", "empty", "two-tokens", "outside-vocab"])
def test_a_bad_jsonl_row_is_one_line_naming_it(world, tmp_path, bad, message):
    ckpt, tok, _data, _hub = world
    good = _user_rows(tok)[:2]
    keys = [k for k in bad if k not in ("clean", "corrupted")]
    lines = [{"clean": r["clean"], "corrupted": r["corrupted"], **{k: r[k] for k in keys}} for r in good] + [bad]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(UsageError, match=message):
        read_task(str(tmp_path / "p.jsonl"), tok, vocab_size=V)
    r = run_main(["discover", "--model", str(ckpt), "--task", str(tmp_path / "p.jsonl"), "-m", "eap"])
    assert r.exception is None and r.code == 2, r.stderr
    assert len(r.error_lines()) == 1 and "row 3" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_cli_discover_with_a_mib_task(world, tmp_path):
    ckpt, _tok, data, _hub = world
    out = tmp_path / "scores.json"
    r = run_main(["discover", "--model", str(ckpt), "--task", "ioi", "-m", "eap", "--out", str(out), "-q"],
                 env={"CBENCH_MIB_DATA": str(data)})
    assert r.exception is None and r.code == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["data"]["n_examples"] == 3 and doc["data"]["task"] == "ioi" and doc["data"]["split"] == "train"
    assert doc["data"]["dataset"] == "mib-bench/ioi" and any(e["score"] != 0 for e in doc["edges"].values())
    r = run_main(["discover", "--model", str(ckpt), "--task", "mcqa", "-m", "eap"],
                 env={"CBENCH_MIB_DATA": str(tmp_path)})
    assert r.code == 2 and len(r.error_lines()) == 1 and "CBENCH_MIB_DATA" not in r.stderr.split("not in")[0]
    assert "MIB's mcqa data is not in" in r.stderr, r.stderr


def test_evaluate_bench_and_the_api_take_a_mib_task(world, tmp_path, monkeypatch):
    from cbench.api.real_models import discover_model

    ckpt, _tok, data, _hub = world
    env = {"CBENCH_MIB_DATA": str(data)}
    scores = tmp_path / "eap.json"
    r = run_main(["discover", "--model", str(ckpt), "--task", "mcqa", "-m", "eap", "--out", str(scores), "-q"], env=env)
    assert r.code == 0, r.stderr
    r = run_main(["evaluate", str(scores), "--model", str(ckpt), "--task", "mcqa"], env=env)
    assert r.exception is None and r.code == 0, r.stderr
    assert "CPR:" in r.stdout + r.stderr
    # MIB scores CPR/CMD by the logit difference: --protocol mib (and --metric logit_diff) read the answers
    for extra in (["--protocol", "mib"], ["--metric", "logit_diff"]):
        r = run_main(["evaluate", str(scores), "--model", str(ckpt), "--task", "mcqa", "--json", *extra], env=env)
        assert r.exception is None and r.code == 0, r.stderr
        assert json.loads(r.stdout)["results"]["faithfulness"]["metric"] == "logit_diff", r.stdout[:400]
    r = run_main(["bench", "--model", str(ckpt), "--task", "arc", "--methods", "eap", "--out", str(tmp_path / "b")],
                 env=env)
    assert r.exception is None and r.code == 0, r.stderr
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert set(doc["results"]["faithfulness"]) == {"eap"}
    assert doc["results"]["faithfulness"]["eap"]["metric"] == "kl"  # cbench's default
    # --protocol mib: CPR/CMD by MIB's metric, as `evaluate --protocol mib` measures them
    r = run_main(["bench", "--model", str(ckpt), "--task", "arc", "--methods", "eap,nap", "--protocol", "mib",
                  "--out", str(tmp_path / "m")], env=env)
    assert r.exception is None and r.code == 0, r.stderr
    mib = json.loads((tmp_path / "m" / "results.json").read_text())
    assert mib["results"]["faithfulness"]["eap"]["metric"] == "logit_diff"
    nap = mib["results"]["faithfulness"]["nap"]  # MIB's NAP: neuron scores, evaluated at the neuron level
    assert nap["metric"] == "logit_diff" and nap["level"] == "neuron"
    assert json.loads((tmp_path / "m" / "scores" / "nap.json").read_text())["method"]["hyperparameters"]["protocol"] == "mib"
    assert mib["inputs"]["protocol"] == "mib" and doc["inputs"]["protocol"] == "cbench"
    ev = run_main(["evaluate", str(tmp_path / "m" / "scores" / "eap.json"), "--model", str(ckpt), "--task", "arc",
                   "--protocol", "mib", "--json"], env=env)
    assert ev.code == 0, ev.stderr
    want = json.loads(ev.stdout)["results"]["faithfulness"]
    assert mib["results"]["faithfulness"]["eap"]["cpr"] == pytest.approx(want["cpr"], abs=1e-9)
    assert mib["results"]["faithfulness"]["eap"]["cmd"] == pytest.approx(want["cmd"], abs=1e-9)
    monkeypatch.setenv("CBENCH_MIB_DATA", str(data))
    api = discover_model(ckpt, "eap", "mcqa")
    cli = json.loads(scores.read_text())
    assert api.data.n_examples == 2 and api.result.metric == "logit_diff"
    for name, e in cli["edges"].items():
        assert e["score"] == pytest.approx(api.result.edge_scores()[name], abs=1e-6)
