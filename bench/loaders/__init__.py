"""Input pipelines. Each yields (images, labels) already on the device, normalised, in the
case's memory format, forever (epochs roll over inside)."""
from __future__ import annotations


class SkipCase(Exception):
    """The case cannot run on this machine for a reason that is not a failure (e.g. DALI missing)."""


def process_batch(case) -> int:
    """Images one process feeds per micro-batch: DataParallel's one process feeds all its GPUs."""
    return case.batch_size * case.gpus if case.strategy == "dp" else case.batch_size


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
