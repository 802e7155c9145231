"""How fast the local hub lists its repositories: ``HfApi().list_models()`` and
``list_datasets()`` against ``cbench hub serve``'s server over the embedded hub seeded with the
whole zoo (issue 47's goal: under 0.5 s for about 300 repositories).

Reports the first call right after the server answers (the info cache still warming in the
background), then the median of ten calls once it is warm, for the short and the ``full=True``
listing.

    python benchmarks/bench_hub_listing.py [--hub DIR] [--out benchmarks/results/hub-listing.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _timed(fn) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = len(list(fn()))
    return time.perf_counter() - t0, n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hub", type=Path, default=None, help="a hub directory (default: a fresh one, seeded)")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    from huggingface_hub import HfApi

    from cbench.hub.seeding import ensure_seeded
    from cbench.hub.server import HubServer

    hub = a.hub or Path(tempfile.mkdtemp(prefix="cbench-hub-")) / "hub"
    t0 = time.perf_counter()
    ensure_seeded(hub)
    seed_s = time.perf_counter() - t0
    with HubServer(hub) as server:
        api = HfApi(endpoint=server.endpoint, token=False)
        first, n_models = _timed(api.list_models)
        # the warm-up thread started with the server: wait until a call is fast
        deadline = time.time() + 120
        while time.time() < deadline and _timed(lambda: api.list_models(full=True))[0] > 0.5:
            time.sleep(1)
        rows = {}
        for name, fn in (("list_models", api.list_models), ("list_models(full=True)", lambda: api.list_models(full=True)),
                         ("list_datasets", api.list_datasets)):
            times = [_timed(fn)[0] for _ in range(10)]
            rows[name] = {"median_s": round(statistics.median(times), 4), "max_s": round(max(times), 4)}
    out = {"repositories": n_models, "seed_s": round(seed_s, 1), "first_call_s": round(first, 3), "warm": rows}
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
