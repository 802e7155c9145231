"""Issue 47: the commands the README and the docs show work verbatim, in the order a reader meets
them, in a fresh directory with a fresh CBENCH_HOME (slow: they pull, discover, score and bench).

Each ``cbench ...`` line of a ``bash`` block runs as written (its ``#`` comment dropped). The lines
left out are listed in ``SKIPPED`` with the reason; a template (``<sha>``, ``path/to``, ``[--name
NAME]``) is not a command to run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/user-guide.md", "docs/hub.md", "docs/new-method.md", "docs/building.md")

# why a line is not run as written
SKIPPED = {
    r"<sha>|path/to|\[": "a template with a placeholder for the reader's own value",
    r"^cbench build (siit|tracr|datasets|release|ioi-model|stress|find)\b":
        "a build of released artifacts (minutes to hours; tests/test_*build*.py and the bench scripts run them)",
    r"--executor ray": "a Ray cluster (tests/test_executor.py runs the Ray executor)",
    r"^cbench hub serve": "a server in the foreground (tests/test_hub_api.py starts and stops one)",
    r"--endpoint http://127.0.0.1:8090": "talks to the server the line before starts",
    r"\| jq ": "needs jq, which cbench does not install",
    r"--track causal-variables --cases main": "the causal-variable track on the main cases (tests/test_localization*.py)",
    r"--method mask-ig|--methods eap,mask-ig": "the method the page registers in its Python block first",
}


def _commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), flags=re.DOTALL):
            for line in block.splitlines():
                cmd = line.split("  #")[0].strip()
                if cmd.startswith("cbench ") and not any(re.search(p, cmd) for p in SKIPPED):
                    out.append((doc, cmd))
    return out


def test_the_skip_list_leaves_the_commands_a_reader_runs():
    cmds = [c for _d, c in _commands()]
    assert len(cmds) >= 30
    for needed in ("cbench pull case-3", "cbench bench --cases main --out results/bench",
                   "cbench report results/bench --html results/site --against acdc", "cbench find list --config numeric"):
        assert needed in cmds, needed


@pytest.mark.slow
def test_every_command_of_the_readme_and_the_docs_runs_verbatim(tmp_path):
    env = dict(os.environ, CBENCH_HOME=str(tmp_path / "home"), CBENCH_THREADS="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(k, None)
    failures = []
    for doc, cmd in _commands():
        proc = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000)
        if proc.returncode != 0:
            failures.append(f"{doc}: {cmd}\n    {proc.stderr.strip()[-400:]}")
    assert not failures, "\n".join(failures)
