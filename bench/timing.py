"""Measured windows bounded by device synchronisation, with every step's time kept."""
from __future__ import annotations

import time

import torch

from .context import RankContext, synchronize


class StepTimer:
    """Per-step times from CUDA events (no sync inside the window), or host time on the CPU."""

    def __init__(self, ctx: RankContext):
        self.ctx = ctx
        self.cuda = ctx.device.type == "cuda"

    def start(self) -> None:
        synchronize(self.ctx)
        self.t0 = time.perf_counter()
        if self.cuda:
            self.events = [self._event()]
        else:
            self.marks = [self.t0]

    def _event(self):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def mark(self) -> None:
        if self.cuda:
            self.events.append(self._event())
        else:
            self.marks.append(time.perf_counter())

    def stop(self) -> tuple[float, list[float]]:
        """Return the window in seconds and each step's seconds."""
        synchronize(self.ctx)
        window = time.perf_counter() - self.t0
        if self.cuda:
            steps = [a.elapsed_time(b) / 1000.0 for a, b in zip(self.events, self.events[1:])]
        else:
            steps = [b - a for a, b in zip(self.marks, self.marks[1:])]
        return window, steps
