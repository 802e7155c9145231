"""Child process of the pickle fuzzer: ``python fuzz_pickle_worker.py N SEED``.

Mutates a corpus of real pickles (InterpBench-style configs and edge lists, dtypes, devices, numpy
scalars, a HookedTransformerConfig, protocols 0-5) N times and feeds each to
:func:`cbench.artifacts.legacy_pickle.loads`. A CbenchError is the expected answer to a bad pickle; any other
exception prints ``UNEXPECTED`` with the input and exits 3; a crash kills this process (the parent
sees the signal). Prints ``done N loaded K refused R`` at the end.
"""

from __future__ import annotations

import pickle
import random
import sys


def corpus() -> list[bytes]:
    import numpy as np
    import torch

    docs = [
        {"n_layers": 2, "d_model": 8, "n_ctx": 5, "d_head": 2, "n_heads": 4, "d_mlp": 32, "d_vocab": 6,
         "act_fn": "gelu", "normalization_type": "LN", "seed": 42, "dtype": torch.float32, "device": "cpu"},
        [("blocks.0.hook_resid_pre", "blocks.0.hook_q_input[2]"), ("blocks.0.attn.hook_result[2]", "blocks.0.hook_mlp_in")],
        {"d": np.float64(0.5), "k": np.int64(3), "dt": np.dtype(">i4"), "dev": torch.device("cuda:1"),
         "s": {1, 2}, "f": frozenset({"a"}), "b": b"\x00\x01", "ba": bytearray(b"xy"), "c": complex(1, 2),
         "big": 2 ** 70, "t": (None, True, 1.5, float("inf"))},
    ]
    out = [pickle.dumps(d, protocol=p) for d in docs for p in range(6)]
    try:
        from transformer_lens import HookedTransformerConfig

        cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=5, d_head=4, n_heads=2, d_vocab=5,
                                      act_fn="relu", d_mlp=16, device="cpu")
        out += [pickle.dumps(cfg, protocol=p) for p in (0, 2, 4)]
    except Exception:  # noqa: BLE001 - the corpus works without it
        pass
    return out


OPCODES = [bytes([c]) for c in b"()]}NKJIMLFSVXBCTUQRbcdehijlmnopqrstuvx\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98"]


def mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:  # flip a bit
            j = rng.randrange(len(b))
            b[j] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:  # insert an opcode, maybe with a big argument
            b[i:i] = rng.choice(OPCODES) + rng.choice([b"", b"\xff\xff\xff\x7f", b"\xff" * 8, b"\x00\x00\x00\x80"])
        elif op == 3:  # truncate
            del b[i:]
        elif op == 4:  # splice another pickle in
            other = rng.choice(pool)
            j = rng.randrange(len(other) + 1)
            b[i:i] = other[j:j + rng.randint(1, 40)]
        elif op == 5 and b:  # duplicate a run
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 16)] * rng.randint(1, 8)
        else:  # delete a run
            del b[i:i + rng.randint(1, 8)]
    return bytes(b)


def main(n: int, seed: int) -> int:
    from cbench.artifacts import legacy_pickle as legacy_pickle
    from cbench.errors import CbenchError

    pool = corpus()
    rng = random.Random(seed)
    loaded = refused = 0
    for k in range(n):
        data = mutate(rng, rng.choice(pool), pool)
        try:
            legacy_pickle.loads(data, f"fuzz-{k}.pkl")
            loaded += 1
        except CbenchError as exc:
            msg = str(exc)
            if not msg.startswith(f"fuzz-{k}.pkl: ") or "\n" in msg:
                print(f"UNCLEAR #{k} {data!r}: {msg!r}")
                return 4
            refused += 1
        except BaseException as exc:  # noqa: BLE001 - exactly what the fuzzer looks for
            print(f"UNEXPECTED #{k} {type(exc).__name__}: {exc!s:.200} input={data!r}")
            return 3
    print(f"done {n} loaded {loaded} refused {refused}")
    return 0


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
