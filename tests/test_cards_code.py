"""Issue 47: every model card says one thing. Its code runs as written -- the TransformerLens 3.x
block under TransformerLens 3.9 and the 4.x block alone under TransformerLens 4.3 -- in the model's
own directory, gives cbench's logits, and its example input has no unknown token; its
``model-index`` lists each metric once.

A sample of the zoo in the default suite; every released model's newest version in the slow suite."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from test_transformer_lens4 import tl4_python

RELEASES = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
SAMPLE = ("case-3", "ioi", "tracr-case-11", "iit-case-4", "stress-backup-1", "var-shared-1")
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _newest(name: str) -> Path:
    return max((RELEASES / name).iterdir(), key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))


def _all() -> list[Path]:
    """Every model artifact's newest release (a plain checkpoint repository, cbench/lm-tiny, has
    no TransformerLens card; tests/test_lm_release.py checks its card)."""
    return [v for v in (_newest(p.name) for p in sorted(RELEASES.iterdir()) if p.is_dir()) if (v / "meta.json").is_file()]


def _card_dirs(version_dir: Path) -> list[Path]:
    """The model directory and each sub-artifact (tracr/) that has a card and its own weights."""
    return [d for d in [version_dir, *sorted(p.parent for p in version_dir.glob("*/README.md"))]
            if (d / "model.safetensors").is_file() and (d / "README.md").is_file()]


def _blocks(card: str) -> dict[str, str]:
    """The loading section's code blocks by TransformerLens version (``"3"``, ``"4"``)."""
    section = card.split("## Load without cbench", 1)[1].split("\n## ", 1)[0]
    out = {}
    for head, version in (("**TransformerLens 3.x**", "3"), ("**TransformerLens 4.x**", "4")):
        if head in section:
            m = _BLOCK.search(section, section.index(head))
            if m:
                out[version] = m.group(1)
    return out


RUNNER = """
import json, os, sys
import numpy as np
jobs = json.load(open(sys.argv[1]))
out = []
for job in jobs:
    os.chdir(job["dir"])
    ns = {"__name__": "__card__"}  # a fresh namespace per block: a name the block does not define is a NameError
    try:
        exec(compile(job["code"], job["dir"] + "/README.md", "exec"), ns)
        tok, logits = ns["tok"], ns["logits"]
        ids = tok(job["example"])["input_ids"]
        np.save(job["npy"], logits.detach().float().numpy())
        out.append({"unknown": [i for i in ids if tok.unk_token_id is not None and i == tok.unk_token_id],
                    "n_tokens": len(ids)})
    except Exception as exc:  # reported per card, the others still run
        out.append({"error": f"{type(exc).__name__}: {exc}"[:500]})
print(json.dumps(out))
"""


def _run_blocks(jobs: list[dict], python: str, tmp_path: Path, tag: str) -> list[dict]:
    """Run each card block in its model's directory, every block of one TransformerLens version in
    one interpreter (its imports paid once), each in a namespace of its own."""
    spec = tmp_path / f"jobs-{tag}.json"
    spec.write_text(json.dumps(jobs))
    proc = subprocess.run([python, "-c", RUNNER, str(spec)], capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cbench_logits(where: Path, text: str) -> np.ndarray:
    from cbench.artifacts.model import read_model_artifact

    model = read_model_artifact(where, verify=False).load_model()
    return model(model.to_tokens(text)).detach().float().numpy()


def check_cards(dirs: list[Path], tmp_path: Path, tl4: str | None) -> list[str]:
    """Every problem found in the cards of ``dirs`` (empty: each says one thing and runs)."""
    problems, jobs = [], {"3": [], "4": []}
    for k, where in enumerate(dirs):
        card = (where / "README.md").read_text()
        front = yaml.safe_load(card.split("---\n", 2)[1])
        for entry in front.get("model-index") or []:
            for result in entry.get("results") or []:
                types = [m["type"] for m in result.get("metrics") or []]
                if len(types) != len(set(types)):
                    problems.append(f"{where}: a metric listed twice: {types}")
        blocks = _blocks(card)
        if "3" not in blocks:
            problems.append(f"{where}: no TransformerLens 3.x block")
        for version, code in blocks.items():
            example = re.findall(r'to_tokens\("(.*)"\)', code)[0]  # the block's own example input
            jobs[version].append({"dir": str(where), "code": code, "example": example,
                                  "npy": str(tmp_path / f"{k}-tl{version}.npy")})
    for version, python in (("3", sys.executable), ("4", tl4)):
        if not jobs[version] or python is None:
            continue
        for job, got in zip(jobs[version], _run_blocks(jobs[version], python, tmp_path, version)):
            where = Path(job["dir"])
            if "error" in got:
                problems.append(f"{where}: the TransformerLens {version}.x block failed: {got['error']}")
                continue
            if got["unknown"] or got["n_tokens"] < 2:
                problems.append(f"{where}: example {job['example']!r} has unknown tokens")
            want = _cbench_logits(where, job["example"])
            tol = dict(atol=1e-4, rtol=1e-4) if version == "3" else dict(atol=2e-4, rtol=1e-3)
            try:
                np.testing.assert_allclose(np.load(job["npy"]), want, **tol)
            except AssertionError as exc:
                problems.append(f"{where}: TransformerLens {version}.x logits differ from cbench's: {str(exc)[:200]}")
    return problems


def test_a_sample_of_cards_runs_in_both_transformer_lens_versions(tmp_path):
    dirs = [d for name in SAMPLE for d in _card_dirs(_newest(name))]
    assert not check_cards(dirs, tmp_path, str(tl4_python()))


@pytest.mark.slow
def test_every_released_card_runs_in_both_transformer_lens_versions(tmp_path):
    dirs = [d for version_dir in _all() for d in _card_dirs(version_dir)]
    problems = check_cards(dirs, tmp_path, str(tl4_python()))
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} problems over {len(dirs)} cards)"
