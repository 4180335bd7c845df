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


class InputStallProbe:
    """How long the device sat idle waiting for each batch, read from the device's side.

    An event is recorded on the device's stream just before the host asks the loader for a batch,
    and one just after the batch arrives. On the stream, the time between the two is zero when the
    host was ahead (the batch was ready before the device ran out of queued work) and grows by every
    moment the device had nothing queued while the host waited; work the loader queues on the stream
    itself (copies, normalisation) counts as input too. The host's own wait can overlap queued GPU
    work, so it alone cannot say a case is input-bound. On the CPU there is no queue: the host's
    wait is the stall.
    """

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.active = False
        self.pairs, self.host_s = [], 0.0

    def fetch(self, batches):
        if not self.active:
            return next(batches)
        if self.cuda:
            stream = torch.cuda.current_stream(self.device)
            before = torch.cuda.Event(enable_timing=True)
            before.record(stream)
            batch = next(batches)
            after = torch.cuda.Event(enable_timing=True)
            after.record(stream)
            self.pairs.append((before, after))
            return batch
        t = time.perf_counter()
        batch = next(batches)
        self.host_s += time.perf_counter() - t
        return batch

    def start(self) -> None:
        self.pairs, self.host_s, self.active = [], 0.0, True

    def stop(self) -> float:
        """Seconds of input stall in the window; call after the window's closing synchronisation."""
        self.active = False
        if self.cuda:
            return sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0
        return self.host_s
