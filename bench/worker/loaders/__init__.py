"""Input pipelines. Each yields (images, labels) already on the device, normalised, in the
case's memory format, forever (epochs roll over inside)."""
from __future__ import annotations

from .common import SkipCase, cores_per_rank  # noqa: F401
from .dali import make_dali_loader
from .synthetic import SyntheticLoader
from .torch_loader import TorchLoader


def make(case, ctx):
    if case.loader == "synthetic":
        return SyntheticLoader(case, ctx)
    if case.loader == "torch":
        return TorchLoader(case, ctx)
    if case.loader == "dali":
        return make_dali_loader(case, ctx)
    raise ValueError(case.loader)
