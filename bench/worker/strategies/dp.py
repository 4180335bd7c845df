"""nn.DataParallel: the article's baseline and its seed-optimized knobs, one knob at a time."""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from .. import precision


def choose_devices(case) -> list[int]:
    """GPU indices for the replicas: 0..N-1, or the N with most free memory (the article's 3.1)."""
    if case.device != "cuda":
        return []
    count = torch.cuda.device_count()
    if case.gpus > count:
        raise RuntimeError(f"gpus={case.gpus} but only {count} CUDA GPU(s) are visible")
    if case.dp_device_selection == "free_memory":
        free = {i: torch.cuda.mem_get_info(i)[0] for i in range(count)}
        return sorted(free, key=lambda i: -free[i])[:case.gpus]
    return list(range(case.gpus))


class LossInForward(nn.Module):
    """Each replica returns its own loss, so DataParallel gathers N scalars, not N x logits."""

    def __init__(self, backbone, criterion):
        super().__init__()
        self.backbone = backbone
        self.criterion = criterion

    def forward(self, images, labels):
        return self.criterion(self.backbone(images).float(), labels).reshape(1)


class DataParallelStrategy:
    def __init__(self, model, case, ctx, criterion):
        self.case = case
        self.criterion = criterion
        ids = choose_devices(case)
        if ids:
            ctx.device = torch.device("cuda", ids[0])
            ctx.devices = [torch.device("cuda", i) for i in ids]
            model.to(ctx.device)
        self.ctx = ctx
        inner = LossInForward(model, criterion) if case.dp_loss_in_forward else model
        # autocast is entered inside each replica: DataParallel's threads would otherwise use fp16
        inner = precision.AutocastInside(inner, case.precision, ctx.device.type)
        output_device = ids[case.dp_output_device] if (ids and case.dp_output_device >= 0) else None
        self.model = nn.DataParallel(inner, device_ids=ids or None, output_device=output_device)
        self.output_device = torch.device("cuda", output_device if output_device is not None else ids[0]) if ids else ctx.device
        self.device_ids = ids

    def loss(self, images, labels):
        if self.case.dp_loss_in_forward:
            return self.model(images, labels).mean()
        logits = self.model(images)
        return self.criterion(logits.float(), labels.to(logits.device, non_blocking=True))

    def no_sync(self):
        return contextlib.nullcontext()

    def facts(self) -> dict:
        return {"dp_device_ids": self.device_ids, "dp_output_device": str(self.output_device)}


def wrap(model, case, ctx, criterion):
    return DataParallelStrategy(model, case, ctx, criterion)
