"""Unmeasured-for-throughput windows that explain the measured ones, run after them:

- all-reduce count: a few DDP steps with a counting communication hook, installed only now so the
  measured windows ran DDP's built-in all-reduce;
- `no_sync`: DDP steps with gradient synchronisation switched off; the gap to the measured
  windows is communication that compute did not hide.
- `minimal`: the same model, optimizer and batch in the plainest loop (no events, no data-wait
  timers, no strategy object), to show what the harness itself costs.
- `profile`: steps under torch's profiler, the device's time per stream (profile_steps.py).
"""
from __future__ import annotations

import time

import torch.distributed as dist

from . import precision, profile_steps
from .context import synchronize
from .span import timed_window


def run(case, ctx, trainer, batches, timer, steps: int) -> dict:
    """`steps`: the measured windows' step count, so these windows are as long as those."""
    out = {}
    if case.strategy == "ddp" and not case.loader_only:
        out["allreduce_calls_per_step"] = count_allreduces(trainer, batches)
    if case.strategy == "ddp" and ctx.world_size > 1 and not case.loader_only:
        trainer.force_no_sync = True
        try:
            window = timed_window(trainer, batches, timer, steps)
        finally:
            trainer.force_no_sync = False
        out["no_sync_window_s"] = window
    if case.overhead_check:
        out["minimal_window_s"] = minimal_loop(case, ctx, trainer, next(batches), steps)
    if case.profile_steps:
        out["profile"] = profile_steps.run(trainer, batches, ctx, case.profile_steps)
    return out


COUNT_STEPS = 2  # all-reduces per step are the same every step; two show it without costing a window


def count_allreduces(trainer, batches) -> float:
    """All-reduce calls per optimizer step, counted by a hook DDP calls once per bucket."""
    strategy = trainer.strategy
    strategy.start_counting()
    before = strategy.allreduce_calls()
    for _ in range(COUNT_STEPS):
        trainer.step(batches)
    return (strategy.allreduce_calls() - before) / COUNT_STEPS


def minimal_loop(case, ctx, trainer, batch, steps: int) -> float:
    """The nanoGPT-style loop on one batch, synchronised at both edges: the harness-free time."""
    images, labels = batch
    model, optimizer, scaler = trainer.strategy.model, trainer.optimizer, trainer.scaler
    criterion = trainer.strategy.criterion
    if dist.is_initialized():
        dist.barrier()
    synchronize(ctx)
    t0 = time.perf_counter()
    for _ in range(steps):
        with precision.autocast(case.precision, ctx.device.type):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    synchronize(ctx)
    return time.perf_counter() - t0
