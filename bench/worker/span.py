"""The measured span: windows run back to back, synchronised at its edges only."""
from __future__ import annotations

import time

import torch.distributed as dist

from ..core import procfs
from . import host_cpu, storage
from .context import synchronize
from .heartbeat import heartbeat
from .timing import StepTimer, split


def timed_span(trainer, batches, timer: StepTimer, steps: int, windows: int, sampler=None,
               pause_s: float = 0.0, before_window=None) -> dict:
    """`windows` measured windows of `steps` steps each, run back to back as one span: every rank
    opens it together and it is device-synchronised at both edges only, so no pause between windows
    lets a loader refill its queue. Each window's seconds are the sum of its steps' times (CUDA events
    on a GPU), and its data wait and input stall are its own steps'. `before_window` (cold reads: the
    page cache emptied) runs before each window, outside every window's time; the bytes the rank's
    processes fetched from storage over the span are counted either way."""
    if dist.is_initialized():
        dist.barrier()
    probe = trainer.input_probe
    waits = []
    if sampler:
        sampler.start()
    if probe:
        probe.start()
    # the host's counters at the host's window edges: a real loader works on the host, so that is
    # where its pace is set (one small file read per window)
    cpu, table = [host_cpu.read()], procfs.process_table()  # one listing for the rank's CPU ticks and storage bytes
    own, read_before, evict_s = [host_cpu.own_ticks(table=table)], storage.tree_read_bytes(table=table), 0.0
    if before_window:
        evict_s += before_window()
    timer.start()
    for w in range(windows):
        phase = f"window {w + 1} of {windows}"
        if before_window and w:
            evict_s += before_window()
            timer.exclude_since_mark()  # the eviction is no step's time
        for step in range(steps):
            heartbeat.beat(phase, step)
            waits.append(trainer.step(batches))
            timer.mark()
            if pause_s:  # an injected slowdown: the device idles for the pause, whatever was queued
                synchronize(timer.ctx)
                time.sleep(pause_s)
        cpu.append(host_cpu.read())
    span_s, step_times = timer.stop()
    table = procfs.process_table()
    own.append(host_cpu.own_ticks(table=table))
    read_after = storage.tree_read_bytes(table=table)
    stalls = probe.stop() if probe else None
    if sampler:
        sampler.stop()
    step_chunks = split(step_times, steps, windows)
    fetches_per_step = trainer.case.accumulation_steps
    return {"windows_s": [sum(c) for c in step_chunks], "step_times_s": step_chunks, "span_s": span_s,
            "data_wait_s": [sum(c) for c in split(waits, steps, windows)],
            "input_stall_s": [sum(c) for c in split(stalls, steps * fetches_per_step, windows)] if probe else None,
            **host_cpu.over_windows(cpu), **host_cpu.span_ticks(cpu[0], cpu[-1], own[0], own[-1]),
            "storage_read_bytes": None if read_before is None or read_after is None else read_after - read_before,
            **({"cold_evict_s": evict_s} if before_window else {})}


def timed_window(trainer, batches, timer: StepTimer, steps: int) -> float:
    """One unpaused window on its own (the extra windows); its seconds."""
    return timed_span(trainer, batches, timer, steps, 1)["windows_s"][0]
