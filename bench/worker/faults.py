"""Failures: the test-only ones a case can inject, and telling an out-of-memory error from others."""
from __future__ import annotations

import os
import sys
import time

import torch

from ..core.case import Case
from .context import RankContext

OOM_ERRORS = (getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError)
# allocation failures that PyTorch raises as plain RuntimeErrors (the CPU allocator, cuDNN, cuBLAS)
OOM_MESSAGES = ("DefaultCPUAllocator: can't allocate memory", "CUDNN_STATUS_ALLOC_FAILED",
                "CUBLAS_STATUS_ALLOC_FAILED", "out of memory")


def is_oom(e: BaseException) -> bool:
    return isinstance(e, OOM_ERRORS) or (isinstance(e, RuntimeError) and any(m in str(e) for m in OOM_MESSAGES))


def inject_fault(case: Case, ctx: RankContext) -> None:
    """Test-only failures, so the launcher's handling of each can be checked on the CPU."""
    if not case.fault or ctx.rank != case.fault_rank:
        return
    if case.fault == "oom":  # a real allocation failure of the device's own allocator, nothing held
        torch.empty(1 << 62, dtype=torch.uint8, device=ctx.device)
    if case.fault == "crash":
        print(f"injected fault: rank {ctx.rank} crashes", file=sys.stderr, flush=True)
        os._exit(3)
    if case.fault == "hang":
        while True:  # the other ranks wait for this one in their next collective
            time.sleep(1)
