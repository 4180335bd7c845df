"""What every loader shares: how many cores a rank's workers get, the dtype its batches are delivered in,
and the skip that is no failure."""
from __future__ import annotations

import os


class SkipCase(Exception):
    """The case cannot run on this machine for a reason that is not a failure (e.g. DALI missing)."""


def cores_per_rank(requested: int) -> int:
    """Workers or threads for one rank: as asked, or (-1) the cores this process may use shared over
    the ranks on this machine. A fact of the machine, stored with the result, never in the case id."""
    if requested >= 0:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


def half_input(precision: str, on_gpu: bool) -> bool:
    """Whether batches are delivered in float16: fp16 autocast on a GPU takes half-precision images as they
    are, so no conversion runs on the GPU; the other precisions, and the CPU, read float32. DALI and the
    synthetic loader follow it alike, so a fed step and its synthetic ceiling run the same compiled program."""
    return precision == "fp16" and on_gpu


def dtype_fact(half: bool) -> str:
    """The `loader_dtype` fact, in DALI's type names as the records have always stored them."""
    return "float16" if half else "float"
