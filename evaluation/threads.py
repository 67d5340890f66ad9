"""One CPU thread per worker process.

Torch (and the BLAS under numpy) start one thread per core by default. With one worker per core every worker's
threads then compete for every core, which halved the throughput of episode sweeps and training here; each
worker gets one thread instead, and the parallelism comes from the workers.
"""

from __future__ import annotations

import os
import sys

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def one_thread_env() -> dict[str, str]:
    """The environment variables that give a process started with them one compute thread."""
    return {name: "1" for name in THREAD_ENV_VARS}


def limit_worker_threads() -> None:
    """Give this process one compute thread: for torch when it is imported now or later, and for BLAS libraries
    loaded later."""
    os.environ.update(one_thread_env())
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
