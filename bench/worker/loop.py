"""The measured loop of one rank: first step, label check, warm-up, the windows as one span, the
extra windows that explain them, and what the rank reports."""
from __future__ import annotations

import math
import os
import resource
import time

import torch
import torch.distributed as dist

from ..core.case import Case
from ..core.case_checks import CUDA_CONNECTIONS_VAR
from ..core.labels import CUDA_GRAPH_MODES
from . import extra_windows, loaders, storage
from .context import RankContext, synchronize
from .dtype_check import (LabelMismatch, check_compile_wrapper, check_input_channels, check_kernel_choice, check_label,
                          compiled_dtypes, compute_dtypes)
from .faults import inject_fault
from .gpu_sampler import sampler_for
from .heartbeat import heartbeat
from .phases import mark
from .span import timed_span
from .timing import StepTimer
from .trainer import LoaderOnly, Trainer, cpp_wrapper_graphs, cuda_graph_skips, kernel_choice_facts

SLOWDOWN_VAR = "BENCH_INJECT_SLOWDOWN_PCT"
"""Test of the comparison method only: every measured step is followed by an idle pause of this
percentage of the warm-up's step time, so a run can be made slower on purpose; the windows are sized with
the pauses. Stored with the record."""
MAX_STEPS_PER_WINDOW = 100_000


def peak_memory(ctx: RankContext) -> dict:
    if ctx.device.type == "cuda":
        per = {str(d): torch.cuda.max_memory_allocated(d) for d in ctx.devices}
        return {"peak_memory_bytes": max(per.values()), "peak_memory_kind": "cuda_max_allocated",
                "peak_memory_bytes_per_device": per}
    return {"peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_memory_kind": "host_max_rss"}


def cuda_queue_facts(case: Case, ctx: RankContext) -> dict:
    """The hardware work queues this process's CUDA context was made with, as its environment set them (None:
    the driver's default); a case that asked for a count and did not get it fails before measuring."""
    if ctx.device.type != "cuda":
        return {}
    seen = os.environ.get(CUDA_CONNECTIONS_VAR)
    if case.cuda_max_connections and seen != str(case.cuda_max_connections):
        raise LabelMismatch(f"cuda_max_connections={case.cuda_max_connections} but the process ran with "
                            f"{CUDA_CONNECTIONS_VAR}={seen}")
    return {"cuda_max_connections_env": seen}


def cold_window_start(files: list[str], batches, queued: int):
    """What runs before each cold window: the data set's pages dropped from the page cache, then the
    batches the loader made meanwhile (up to its queue, `queued`) taken off untimed. Its workers keep
    decoding while the cache is emptied, so a window would open on a full queue: on one H100 host the
    torch DataLoader's cold windows ran faster than its warm ones (5,637.6 against 2,876.4 images/s at 8
    ranks, one process each) while they opened so. Returns the eviction's seconds."""
    def before_window() -> float:
        evict_s = storage.evict(files)
        for _ in range(queued):
            next(batches)
        return evict_s
    return before_window


def measure(case: Case, ctx: RankContext) -> dict:
    queues = cuda_queue_facts(case, ctx)
    trainer = LoaderOnly(case, ctx) if case.loader_only else Trainer(case, ctx)
    loader = loaders.make(case, ctx)
    if getattr(trainer, "graphed", None):
        trainer.graphed.stable_inputs = getattr(loader, "stable_batches", False)
    if hasattr(loader, "input_wait_s") and not case.loader_only:
        trainer.input_wait_clock = lambda: loader.input_wait_s
    batches = iter(loader)
    files = getattr(loader, "files", None)  # a real loader's JPEGs
    queued = getattr(loader, "prefetch_batches", 0)
    evict = cold_window_start(files, batches, queued) if case.cold_reads else None
    per_step_images = case.process_batch * case.accumulation_steps
    try:
        timer = StepTimer(ctx)
        # NVML's start-up happens here, not between the warm-up and the span, where a pause would let
        # a loader's workers refill their queue and flatter the first window
        sampler = sampler_for(ctx.devices) if ctx.device.type == "cuda" else None
        if ctx.device.type == "cuda":
            for d in ctx.devices:
                torch.cuda.reset_peak_memory_stats(d)
        heartbeat.beat("first step")
        mark("first_step_start")
        t = time.perf_counter()
        trainer.step(batches)  # the first step pays for compilation, cuDNN autotuning, NCCL set-up
        synchronize(ctx)
        first_step_s = time.perf_counter() - t
        mark("first_step_end")
        # a hook added to a compiled model would force recompiles inside the span: its probe runs after
        dtypes, compile_facts = {}, {}
        if not case.loader_only and not case.compile and not case.cuda_graph:
            dtypes = compute_dtypes(trainer, batches)
            check_label(case, dtypes)
        input_facts = {} if case.loader_only else check_input_channels(case, trainer.model, next(batches)[0])
        # batches a loader prefetched while the model was being built would flatter the span:
        # take that many off its queue (training on them would only cost time), then warm up,
        # so the span sees the loader's steady state
        for _ in range(queued):
            next(batches)
        heartbeat.beat("warm-up")
        per_round = steps_per_round(case, getattr(loader, "workers", 0))
        # the warm-up whose pace sets the windows' length spans whole rounds of the loader's workers too
        timed = max(case.warmup_steps, 2) - 1
        timed = math.ceil(timed / per_round) * per_round
        warmup_run = timed + 1
        step_estimate_s = timed_warmup(trainer, batches, ctx, timed)
        slowdown_pct = float(os.environ.get(SLOWDOWN_VAR) or 0)
        pause_s = step_estimate_s * slowdown_pct / 100.0
        # a 10x slowdown sized without its pauses made every window ten times min_window_s
        steps = window_steps(case, ctx, step_estimate_s + pause_s, per_round)
        settle_steps = steps if case.loader != "synthetic" else 0
        if settle_steps:
            # a real loader's first window after start-up still ran 12% fast on one H200 (torch
            # DataLoader alone, 16 workers) with a short warm-up: one unmeasured window-length
            # stretch first, so the span starts in the loader's steady state
            heartbeat.beat("settling")
            for _ in range(settle_steps):
                trainer.step(batches)
        inject_fault(case, ctx)
        scale_before = loss_scale(trainer)
        mark("span_start")
        span = timed_span(trainer, batches, timer, steps, case.repeats, sampler, pause_s, evict)
        mark("span_end")
        scale_after = loss_scale(trainer)
        check_training(scale_before, scale_after, steps * case.repeats)
        heartbeat.beat("after the windows")
        extra = extra_windows.run(case, ctx, trainer, batches, timer, steps)
        if (case.compile or case.cuda_graph) and not case.loader_only:  # no hook sees a graph's replay
            dtypes = compiled_dtypes(trainer, batches)
            check_label(case, dtypes)
            if case.compile in CUDA_GRAPH_MODES and cuda_graph_skips():
                raise LabelMismatch(f"compile={case.compile} means CUDA graphs, but Inductor ran "
                                    f"{cuda_graph_skips()} compiled graph(s) without them")
            if case.compile:
                compile_facts = {"cpp_wrapper_graphs": check_compile_wrapper(case.compile_wrapper, cpp_wrapper_graphs())}
        if not case.loader_only:
            compile_facts.update(check_kernel_choice(case, kernel_choice_facts(case, ctx.device.type)))
        loss = float(trainer.last_loss.detach().float()) * case.accumulation_steps
        return {
            **span, "images": [per_step_images * steps] * case.repeats, "steps_per_window": steps,
            "step_estimate_s": step_estimate_s, "injected_slowdown_pct": slowdown_pct,
            "first_step_s": first_step_s, "warmup_steps_run": warmup_run, "settle_steps_run": settle_steps,
            "prefetched_batches_drained": queued,
            **({"cold_batches_drained_per_window": queued} if case.cold_reads else {}),
            "compute_dtypes": dtypes, "math_flags": trainer.math_flags,
            "allreduce_calls_per_step": None, "last_loss": loss,
            **scaler_facts(scale_before, scale_after),
            "gpu_samples": sampler.summary() if sampler else {}, **extra,
            **peak_memory(ctx), **trainer.strategy.facts(), **loader.facts(), **compile_facts, **input_facts, **queues,
            **(storage.data_facts(files) if files else {}),
        }
    finally:
        loader.close()


def loss_scale(trainer) -> float | None:
    """The fp16 loss scale now (read outside the timed span: it waits for the device)."""
    scaler = getattr(trainer, "scaler", None)
    return float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None


def scaler_facts(before: float | None, after: float | None) -> dict:
    """The loss scale at the span's edges and the updates it skipped: each step whose gradients
    overflowed halves the scale and skips its update (it grows only after 2,000 clean steps)."""
    if before is None:
        return {}
    skipped = round(math.log2(before / after)) if after > 0 else None
    return {"loss_scale_span": [before, after], "updates_skipped_in_span": max(skipped, 0) if skipped is not None
            else "all: the scale fell to 0"}


class NotTraining(RuntimeError):
    """The fp16 loss scaler skipped every update of the measured windows: what ran was no training."""


def check_training(before: float | None, after: float | None, span_steps: int) -> None:
    """Refuse a span in which every optimizer step was skipped for non-finite gradients (a figure of
    forward and backward with no update is not a training step's)."""
    skipped = scaler_facts(before, after).get("updates_skipped_in_span")
    if skipped is None or (isinstance(skipped, int) and skipped < span_steps):
        return
    raise NotTraining(f"fp16 loss scaling skipped every update of the {span_steps} measured steps (the loss scale "
                      f"fell from {before:g} to {after:g}): the gradients were never finite, so nothing trained")


def timed_warmup(trainer, batches, ctx: RankContext, steps: int) -> float:
    """Run the warm-up steps after the first; return their mean seconds per step (device-synchronised)."""
    synchronize(ctx)
    t = time.perf_counter()
    for _ in range(steps):
        trainer.step(batches)
    synchronize(ctx)
    return (time.perf_counter() - t) / steps


def steps_per_round(case: Case, loader_workers: int) -> int:
    """Optimizer steps in one round of a torch DataLoader's workers (1 for other loaders).

    Its workers each hand over a whole batch, in turn, and started together, so they deliver in rounds
    of `workers` batches: a window (or a warm-up that sets the windows' length) that ends mid-round is
    decided by where the cut falls (seen on one H200 with 16 workers: loader-only windows of one
    process 45% apart). Those cover whole rounds."""
    if loader_workers <= 1:
        return 1
    return math.lcm(loader_workers, case.accumulation_steps) // case.accumulation_steps


def window_steps(case: Case, ctx: RankContext, step_estimate_s: float, per_round: int = 1) -> int:
    """Steps per measured window: at least `steps`, and enough to last `min_window_s` at the warm-up's
    pace, in whole rounds of the loader's workers; every rank takes the largest count, so all ranks
    measure the same steps."""
    steps = case.steps
    if case.min_window_s > 0 and step_estimate_s > 0:
        steps = max(steps, min(MAX_STEPS_PER_WINDOW, math.ceil(case.min_window_s / step_estimate_s)))
    steps = math.ceil(steps / per_round) * per_round
    if dist.is_initialized():
        t = torch.tensor([steps], device=ctx.device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        steps = int(t.item())
    return steps
