"""Tensors made once on the device: the compute-only ceiling, no input cost at all."""
from __future__ import annotations

import torch

from ..stem import with_zero_channels
from .common import dtype_fact, half_input


class SyntheticLoader:
    stable_batches = True
    """Every batch is the same two tensors."""

    def __init__(self, case, ctx):
        g = torch.Generator(device="cpu").manual_seed(case.seed + ctx.rank)
        n = case.process_batch
        images = torch.randn(n, 3, case.image_size, case.image_size, generator=g)
        labels = torch.randint(0, case.num_classes, (n,), generator=g)
        fmt = torch.channels_last if case.channels_last else torch.contiguous_format
        self.half = half_input(case.precision, ctx.device.type == "cuda")  # in the dtype DALI would deliver
        images = images.to(ctx.device, torch.float16 if self.half else torch.float32)
        self.images = with_zero_channels(images, case.input_channels, fmt)  # RGB, then zeros where the stem reads more
        self.labels = labels.to(ctx.device)

    def __iter__(self):
        while True:
            yield self.images, self.labels

    def facts(self) -> dict:
        return {"loader_images": None, "loader_dtype": dtype_fact(self.half)}

    def close(self) -> None:
        pass
