"""Issue 47: the local hub serves byte ranges as huggingface.co does, so ``datasets``' streaming
(which reads a parquet file's footer with ``Range: bytes=-8`` and then its row groups) works on
every file, not only on those under the 64 KB it fetches whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import cbench.hub as hubmod
from cbench.hub.api import parse_range
from cbench.hub.server import HubServer
from hub_helpers import write_tiny_dataset

N_ROWS = 6000  # a parquet file of about 100 KB: over what datasets reads in one request


def test_parse_range_single_suffix_open_and_unsatisfiable():
    assert parse_range("bytes=0-3", 10) == (0, 3)
    assert parse_range("bytes=4-", 10) == (4, 9)
    assert parse_range("bytes=-8", 10) == (2, 9)
    assert parse_range("bytes=-80", 10) == (0, 9)  # a suffix longer than the file: all of it
    assert parse_range("bytes=5-100", 10) == (5, 9)
    assert parse_range("bytes=10-", 10) == () and parse_range("bytes=-0", 10) == ()
    for bad in ("bytes=0-1,4-5", "items=0-1", "bytes=5-2", "bytes=-", "", "bytes=a-b"):
        assert parse_range(bad, 10) is None, bad  # not one range: the whole file, 200


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranges")
    rows = [{"base": f"x {i % 7} {i} {'ab' * (i % 13)}", "label": i % 5, "id": f"row-{i:06d}"} for i in range(N_ROWS)]
    ds = write_tiny_dataset(root / "ds", rows, "case-3")
    hubmod.publish(ds, "cbench/counterfactuals", "dataset", "v1.0.0", hub=root / "hub")
    data = (ds / "data" / "case-3" / "train.parquet").read_bytes()
    assert len(data) > 65536
    with HubServer(root / "hub") as server:
        yield server, data, root


def test_range_requests_answer_206_with_the_right_bytes(served):
    server, data, _root = served
    url = f"{server.endpoint}/datasets/cbench/counterfactuals/resolve/v1.0.0/data/case-3/train.parquet"
    size = len(data)
    r = httpx.get(url, headers={"Range": "bytes=-8"})
    assert r.status_code == 206 and r.content == data[-8:] and r.content.endswith(b"PAR1")
    assert r.headers["content-range"] == f"bytes {size - 8}-{size - 1}/{size}" and r.headers["accept-ranges"] == "bytes"
    r = httpx.get(url, headers={"Range": "bytes=100-199"})
    assert r.status_code == 206 and r.content == data[100:200] and r.headers["content-length"] == "100"
    r = httpx.get(url, headers={"Range": f"bytes={size - 5}-"})
    assert r.status_code == 206 and r.content == data[-5:]
    r = httpx.get(url, headers={"Range": f"bytes={size}-"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{size}"
    r = httpx.get(url, headers={"Range": "bytes=0-1,5-6"})  # several ranges: the whole file, as RFC 9110 allows
    assert r.status_code == 200 and r.content == data
    assert httpx.get(url).content == data
    # a missing file is still huggingface.co's EntryNotFound, ranged or not
    r = httpx.get(url.replace("train.parquet", "nope.parquet"), headers={"Range": "bytes=-8"})
    assert r.status_code == 404 and r.headers["x-error-code"] == "EntryNotFound"


STREAM = """
import json, sys
from datasets import load_dataset
ds = load_dataset(sys.argv[1], sys.argv[2], split=sys.argv[3], revision=sys.argv[4], streaming=True)
rows = list(ds)
print(json.dumps({"n": len(rows), "first": rows[0], "last": rows[-1]}))
"""


def _env(endpoint: str, home: Path) -> dict:
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
        env.pop(k, None)
    return env


def test_streaming_load_dataset_reads_a_file_over_64_kb(served):
    server, _data, root = served
    proc = subprocess.run([sys.executable, "-c", STREAM, "cbench/counterfactuals", "case-3", "train", "v1.0.0"],
                          capture_output=True, text=True, env=_env(server.endpoint, root / "hf"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n"] == N_ROWS and out["first"]["id"] == "row-000000" and out["last"]["id"] == f"row-{N_ROWS - 1:06d}"


EVERY = """
import json, sys
from datasets import get_dataset_config_names, get_dataset_split_names, load_dataset
from huggingface_hub import HfApi
out = {}
for info in HfApi().list_datasets():
    for config in get_dataset_config_names(info.id):
        for split in get_dataset_split_names(info.id, config):
            n = sum(1 for _ in load_dataset(info.id, config, split=split, streaming=True))
            out[f"{info.id}/{config}/{split}"] = n
print(json.dumps(out))
"""


@pytest.mark.slow
def test_every_released_dataset_streams_every_split_from_the_seeded_hub(tmp_path):
    """The embedded hub, seeded with the whole zoo: every released dataset, config and split
    iterates with ``streaming=True`` and gives as many rows as the non-streaming load."""
    from cbench.hub.seeding import ensure_seeded

    hub = tmp_path / "hub"
    ensure_seeded(hub)
    with HubServer(hub) as server:
        proc = subprocess.run([sys.executable, "-c", EVERY], capture_output=True, text=True,
                              env=_env(server.endpoint, tmp_path / "hf"), timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    datasets = {k.split("/")[1] for k in counts}
    assert {"counterfactuals", "circuits", "tracr-programs"} <= datasets
    assert all(n > 0 for n in counts.values()), {k: n for k, n in counts.items() if n == 0}
