"""Input pipelines. Each yields (images, labels) already on the device, normalised, in the
case's memory format, forever (epochs roll over inside)."""
from __future__ import annotations


class SkipCase(Exception):
    """The case cannot run on this machine for a reason that is not a failure (e.g. DALI missing)."""


def process_batch(case) -> int:
    """Images one process feeds per micro-batch: DataParallel's one process feeds all its GPUs."""
    return case.batch_size * case.gpus if case.strategy == "dp" else case.batch_size


def cores_per_rank(requested: int) -> int:
    """Workers or threads for one rank: as asked, or (-1) the cores this process may use shared over
    the ranks on this machine. A fact of the machine, stored with the result, never in the case id."""
    import os
    if requested >= 0:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


def make(case, ctx):
    if case.loader == "synthetic":
        from .synthetic import SyntheticLoader
        return SyntheticLoader(case, ctx)
    if case.loader == "torch":
        from .torch_loader import TorchLoader
        return TorchLoader(case, ctx)
    if case.loader == "dali":
        from .dali import make_dali_loader
        return make_dali_loader(case, ctx)
    raise ValueError(case.loader)
