"""Images made once on the device: the compute-only ceiling, no input cost at all."""
from __future__ import annotations

import torch


class SyntheticLoader:
    stable_batches = True
    """Every batch is the same two tensors (the labels redrawn in place)."""

    def __init__(self, case, ctx):
        g = torch.Generator(device="cpu").manual_seed(case.seed + ctx.rank)
        n = case.process_batch
        images = torch.randn(n, 3, case.image_size, case.image_size, generator=g)
        labels = torch.randint(0, case.num_classes, (n,), generator=g)
        fmt = torch.channels_last if case.channels_last else torch.contiguous_format
        self.images = images.to(ctx.device).contiguous(memory_format=fmt)
        self.labels = labels.to(ctx.device)
        self.num_classes = case.num_classes

    def __iter__(self):
        while True:
            # fresh labels every step (one small kernel on the device): a model shown one fixed batch
            # learns it, and in fp16 its logits then overflow and the loss scaler skips the updates
            # (one H200, one fixed batch: the scale had fallen to 0 after 264 compiled steps)
            self.labels.random_(0, self.num_classes)
            yield self.images, self.labels

    def facts(self) -> dict:
        return {"loader_images": None}

    def close(self) -> None:
        pass
