"""The CPU threads a run uses (results depend on the thread count, so it is set in one place)."""


def use_cpu_threads() -> None:
    """Torch intra-op threads for commands that run models: ``CBENCH_THREADS``, default 1. The
    benchmark's models are tiny and CPUs are often shared: one thread is much faster than threads
    contending (node SP on case 3 took 28 s with one thread per core, 1 s with one)."""
    import os

    import torch

    torch.set_num_threads(int(os.environ.get("CBENCH_THREADS", "1")))
