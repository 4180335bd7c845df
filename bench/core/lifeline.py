"""Tie a process's life to its parent's, so nothing of a case outlives whatever ran it.

Linux's parent-death signal (prctl PR_SET_PDEATHSIG) is delivered by the kernel when the parent
exits for any reason, SIGKILL included, where no handler of the parent's could run. The launcher
sets it on torchrun (or the single worker) it starts; each worker sets it again on itself, since
torchrun is its parent. Elsewhere (no prctl) the launcher's own clean-up is all there is.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
TOKEN_VAR = "BENCH_RUN_TOKEN"
"""Set on every process of a case (harness/launch.py), so all of them can be found and ended."""
TOKEN_PREFIX_VAR = "BENCH_TOKEN_PREFIX"
"""A prefix for every case token this process starts, so a test (or a wrapper) can follow exactly
the processes it started, however many other bench jobs run on the machine."""
FORKSERVER_VAR = "BENCH_WORKER_FORKSERVER"
"""The test suite's fork-server folder (worker/forkserver.py): where it is set, the launcher starts torchrun
through bench.worker.torchrun, which hands it to the server as `python -m bench.worker` hands a worker."""


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when its parent exits; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def orphaned(expected_parent: int | None) -> bool:
    """The parent died before die_with_parent took effect (its signal then never comes)."""
    return expected_parent is not None and os.getppid() != expected_parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def preexec() -> None:
    """For subprocess.Popen(preexec_fn=...): runs in the child between fork and exec."""
    die_with_parent(signal.SIGKILL)
