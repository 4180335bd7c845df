"""Measured spans bounded by device synchronisation, with every step's time kept, so windows are cut
from one continuous span with no pause between them."""
from __future__ import annotations

import time

import torch

from .context import RankContext, synchronize


class StepTimer:
    """Per-step times from CUDA events (no sync inside the span), or host time on the CPU."""

    def __init__(self, ctx: RankContext):
        self.ctx = ctx
        self.cuda = ctx.device.type == "cuda"

    def start(self) -> None:
        synchronize(self.ctx)
        self.t0 = time.perf_counter()
        self.gaps: set[int] = set()
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

    def exclude_since_mark(self) -> None:
        """What ran since the last mark (work outside the windows) is no step's time: a new mark opens the
        next step, and the gap between the two is left out."""
        self.gaps.add(len(self.events if self.cuda else self.marks) - 1)
        self.mark()

    def stop(self) -> tuple[float, list[float]]:
        """Return the span in seconds (host clock, synchronised at both edges) and each step's seconds."""
        synchronize(self.ctx)
        span = time.perf_counter() - self.t0
        if self.cuda:
            steps = [a.elapsed_time(b) / 1000.0 for a, b in zip(self.events, self.events[1:])]
        else:
            steps = [b - a for a, b in zip(self.marks, self.marks[1:])]
        return span, [s for i, s in enumerate(steps) if i not in self.gaps]


def split(values: list[float], per_window: int, windows: int) -> list[list[float]]:
    """`windows` consecutive chunks of `per_window` values each."""
    if len(values) != per_window * windows:
        raise ValueError(f"{len(values)} values cannot be {windows} windows of {per_window}")
    return [values[i * per_window:(i + 1) * per_window] for i in range(windows)]


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
        self.pairs, self.host_waits = [], []

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
        self.host_waits.append(time.perf_counter() - t)
        return batch

    def start(self) -> None:
        self.pairs, self.host_waits, self.active = [], [], True

    def stop(self) -> list[float]:
        """Seconds of input stall of each fetch since start; call after the closing synchronisation."""
        self.active = False
        if self.cuda:
            return [a.elapsed_time(b) / 1000.0 for a, b in self.pairs]
        return list(self.host_waits)
