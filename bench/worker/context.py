"""Where one rank runs: its rank, the world, and its device(s)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch


@dataclass
class RankContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    devices: list = field(default_factory=list)
    """Every device this process drives (several only under nn.DataParallel)."""


def from_environment(case) -> RankContext:
    """Read torchrun's variables; pick the device the case asks for."""
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if case.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device='cuda' but torch sees no CUDA GPU on this machine")
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    ctx = RankContext(rank=rank, world_size=world, local_rank=local, device=device, devices=[device])
    use_step_stream(case, ctx)
    return ctx


def use_step_stream(case, ctx: RankContext) -> None:
    """With step_stream='own', make a stream for the rank's device and let everything after (the model's
    set-up, the loader's copies, every step, the timing events) run on it: work that another library
    queues on CUDA's legacy default stream, or on a blocking stream, then neither waits for the queued
    steps nor holds them up. Set before anything touches the device, so nothing needs to wait across."""
    if case.step_stream == "own" and ctx.device.type == "cuda":
        torch.cuda.set_stream(torch.cuda.Stream(ctx.device))


def synchronize(ctx: RankContext) -> None:
    """Wait for every device this rank drives; a window edge must not leave work in flight."""
    for d in ctx.devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)
