"""The per-rank measured loop. Run as `python -m bench.worker --case FILE --out DIR`, by the
launcher (one process) or by torchrun (one per rank). Writes DIR/rank<R>.json; knows no sweeps."""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import torchvision

from . import extra_windows, host_cpu, lifeline, loaders, precision, strategies
from .case import Case
from .context import RankContext, from_environment, synchronize
from .gpu_sampler import sampler_for
from .timing import InputStallProbe, StepTimer, split

SLOWDOWN_VAR = "BENCH_INJECT_SLOWDOWN_PCT"
"""Test of the comparison method only: every measured step is followed by an idle pause of this
percentage of the warm-up's step time, so a run can be made slower on purpose. Stored with the record."""
MAX_STEPS_PER_WINDOW = 100_000

OOM_ERRORS = (getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError)
# allocation failures that PyTorch raises as plain RuntimeErrors (the CPU allocator, cuDNN, cuBLAS)
OOM_MESSAGES = ("DefaultCPUAllocator: can't allocate memory", "CUDNN_STATUS_ALLOC_FAILED",
                "CUBLAS_STATUS_ALLOC_FAILED", "out of memory")


def is_oom(e: BaseException) -> bool:
    return isinstance(e, OOM_ERRORS) or (isinstance(e, RuntimeError) and any(m in str(e) for m in OOM_MESSAGES))


class Heartbeat:
    """What this rank is doing, in a small file the launcher reads if the case hangs or dies:
    phase, step, seconds since start and resident memory. Phase changes are written at once,
    steps at most once a second, so a measured window pays almost nothing for it."""

    def __init__(self, path: Path | None = None):
        self.path, self.t0, self.last, self.phase = path, time.monotonic(), 0.0, ""

    def beat(self, phase: str, step: int | None = None) -> None:
        now = time.monotonic()
        if self.path is None or (phase == self.phase and now - self.last < 1.0):
            return
        self.phase, self.last = phase, now
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        _write(self.path, {"phase": phase, "step": step, "elapsed_s": round(now - self.t0, 2), "max_rss_bytes": rss,
                           "wall_time": time.time()})


heartbeat = Heartbeat()


def build_model(case: Case, ctx: RankContext) -> torch.nn.Module:
    torch.manual_seed(case.seed)
    model = torchvision.models.get_model(case.model, weights=None, num_classes=case.num_classes)
    fmt = torch.channels_last if case.channels_last else torch.contiguous_format
    return model.to(ctx.device, memory_format=fmt).train()


def inject_fault(case: Case, ctx: RankContext) -> None:
    """Test-only failures, so the launcher's handling of each can be checked on the CPU."""
    if not case.fault or ctx.rank != case.fault_rank:
        return
    if case.fault == "oom":  # a real allocation failure of the device's own allocator, nothing held
        torch.empty(1 << 62, dtype=torch.uint8, device=ctx.device)
    if case.fault == "crash":
        print(f"injected fault: rank {ctx.rank} crashes", file=sys.stderr, flush=True)
        os._exit(3)
    if case.fault == "hang":
        while True:  # the other ranks wait for this one in their next collective
            time.sleep(1)


class Trainer:
    """One optimizer step = K micro-batches (forward, loss, backward), then the update."""

    def __init__(self, case: Case, ctx: RankContext):
        self.case = case
        self.ctx = ctx
        self.math_flags = precision.apply_math_flags(case.precision)
        torch.backends.cudnn.benchmark = case.cudnn_benchmark
        model = build_model(case, ctx)
        criterion = torch.nn.CrossEntropyLoss()
        self.strategy = strategies.get(case.strategy).wrap(model, case, ctx, criterion)
        self.model = model
        if case.compile in CUDA_GRAPH_MODES:
            demand_cuda_graphs()
        self.loss = lambda images, labels: (self.strategy.loss(images, labels), None)
        if case.compile and case.compile_scope == "model":
            self.strategy.model = torch.compile(self.strategy.model, mode=case.compile)
        if case.compile and case.compile_scope == "step":
            # forward, autocast and loss in one graph; AOTAutograd compiles its backward with it
            self.loss = torch.compile(step_loss(self.strategy, case.precision, ctx.device.type), mode=case.compile)
        self.logits_dtype = None  # what the compiled step computed its logits in, for the label check
        self.optimizer = make_optimizer(model.parameters(), case.optimizer_impl)
        # after the strategy has placed the model: DataParallel may move the input device
        self.input_probe = InputStallProbe(ctx.device)
        self.scaler = precision.grad_scaler(case.precision, ctx.device.type)
        self.last_loss = None
        self.force_no_sync = False  # set by the exposed-communication window
        # the seconds counted as waiting for input: the host clock around each fetch, unless a loader
        # counts its own time blocked on its producers (the torch DataLoader's workers), so a
        # blocking device copy is not mistaken for waiting on input
        self.input_wait_clock = time.perf_counter

    def step(self, batches) -> float:
        """Run one optimizer step; return the seconds spent waiting for input."""
        k = self.case.accumulation_steps
        wait = 0.0
        for i in range(k):
            before = self.input_wait_clock()
            images, labels = self.input_probe.fetch(batches)
            wait += self.input_wait_clock() - before
            skip_sync = self.force_no_sync or (self.case.accumulation_mode == "no_sync" and i < k - 1)
            with self.strategy.no_sync() if skip_sync else contextlib.nullcontext():
                loss, self.logits_dtype = self.loss(images, labels)
                loss = loss / k
                self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.last_loss = loss
        return wait


CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def demand_cuda_graphs() -> None:
    """A compile mode labelled with CUDA graphs must run them: where Inductor would skip them (and
    only log it), it raises instead, so the case fails with Inductor's reason."""
    import torch._inductor.config as inductor_config
    if hasattr(inductor_config.triton, "cudagraph_or_error"):
        inductor_config.triton.cudagraph_or_error = True


def cuda_graph_skips() -> int:
    """How many compiled graphs Inductor ran without CUDA graphs in this process."""
    from torch._dynamo.utils import counters
    return int(counters["inductor"].get("cudagraph_skips", 0))


def step_loss(strategy, precision_label: str, device_type: str):
    """Forward and loss as one function to compile whole; it also returns the logits' dtype (a
    constant of the traced graph), so the precision label is checked against what the graph computed."""
    def loss_and_logits_dtype(images, labels):
        with precision.autocast(precision_label, device_type):
            logits = strategy.model(images)
            return strategy.criterion(logits, labels), logits.dtype
    return loss_and_logits_dtype


def make_optimizer(params, impl: str) -> torch.optim.Optimizer:
    """The articles' SGD with momentum, in the implementation the case names."""
    flags = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
    return torch.optim.SGD(params, lr=0.01, momentum=0.9, **flags)


class LoaderOnly:
    """Stands in for the trainer when only the input pipeline is measured."""

    input_probe = None  # no model runs, so the device never waits for input

    def __init__(self, case: Case, ctx: RankContext):
        self.case = case
        self.strategy = self
        self.math_flags = {}
        self.last_loss = torch.zeros(())

    def step(self, batches) -> float:
        t = time.perf_counter()
        for _ in range(self.case.accumulation_steps):
            next(batches)
        return time.perf_counter() - t

    def facts(self) -> dict:
        return {}


EXPECTED_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class LabelMismatch(RuntimeError):
    """The numbers were computed in another dtype than the precision label says."""


def check_label(case: Case, dtypes: dict) -> None:
    expected = EXPECTED_DTYPE[case.precision]
    wrong = {d: t for d, t in dtypes.items() if t != expected}
    if not dtypes or wrong:
        raise LabelMismatch(f"precision={case.precision} means {expected} logits, but "
                            f"{wrong or 'no device'} computed {'them' if wrong else 'any'}")


def compiled_dtypes(trainer: Trainer, batches) -> dict:
    """The dtype a compiled model's logits come out in, from one forward outside the windows with
    the grad and autocast state of training (so the compiled graph is reused, not recompiled)."""
    if trainer.case.compile_scope == "step":
        return {str(trainer.ctx.device): str(trainer.logits_dtype).replace("torch.", "")}
    images, _ = next(batches)
    with precision.autocast(trainer.case.precision, trainer.ctx.device.type):
        out = trainer.strategy.model(images)
    return {str(out.device): str(out.dtype).replace("torch.", "")}


def compute_dtypes(trainer: Trainer, batches) -> dict:
    """Run one unmeasured step and record the dtype the classifier produced on each device."""
    seen = {}

    def hook(_module, _inputs, output):
        seen[str(output.device)] = str(output.dtype).replace("torch.", "")

    handle = trainer.model.fc.register_forward_hook(hook)
    try:
        trainer.step(batches)
    finally:
        handle.remove()
    return seen


def peak_memory(ctx: RankContext) -> dict:
    if ctx.device.type == "cuda":
        per = {str(d): torch.cuda.max_memory_allocated(d) for d in ctx.devices}
        return {"peak_memory_bytes": max(per.values()), "peak_memory_kind": "cuda_max_allocated",
                "peak_memory_bytes_per_device": per}
    return {"peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_memory_kind": "host_max_rss"}


def measure(case: Case, ctx: RankContext) -> dict:
    trainer = LoaderOnly(case, ctx) if case.loader_only else Trainer(case, ctx)
    loader = loaders.make(case, ctx)
    if hasattr(loader, "input_wait_s") and not case.loader_only:
        trainer.input_wait_clock = lambda: loader.input_wait_s
    batches = iter(loader)
    per_step_images = loaders.process_batch(case) * case.accumulation_steps
    try:
        timer = StepTimer(ctx)
        # NVML's start-up happens here, not between the warm-up and the span, where a pause would let
        # a loader's workers refill their queue and flatter the first window
        sampler = sampler_for(ctx.devices) if ctx.device.type == "cuda" else None
        if ctx.device.type == "cuda":
            for d in ctx.devices:
                torch.cuda.reset_peak_memory_stats(d)
        heartbeat.beat("first step")
        t = time.perf_counter()
        trainer.step(batches)  # the first step pays for compilation, cuDNN autotuning, NCCL set-up
        synchronize(ctx)
        first_step_s = time.perf_counter() - t
        # a hook added to a compiled model would force recompiles inside the span: its probe runs after
        dtypes = {}
        if not case.loader_only and not case.compile:
            dtypes = compute_dtypes(trainer, batches)
            check_label(case, dtypes)
        # batches a loader prefetched while the model was being built would flatter the span:
        # take that many off its queue (training on them would only cost time), then warm up,
        # so the span sees the loader's steady state
        drained = getattr(loader, "prefetch_batches", 0)
        for _ in range(drained):
            next(batches)
        heartbeat.beat("warm-up")
        per_round = steps_per_round(case, getattr(loader, "workers", 0))
        # the warm-up whose pace sets the windows' length spans whole rounds of the loader's workers too
        timed = max(case.warmup_steps, 2) - 1
        timed = math.ceil(timed / per_round) * per_round
        warmup_run = timed + 1
        step_estimate_s = timed_warmup(trainer, batches, ctx, timed)
        steps = window_steps(case, ctx, step_estimate_s, per_round)
        settle_steps = steps if case.loader != "synthetic" else 0
        if settle_steps:
            # a real loader's first window after start-up still ran 12% fast on one H200 (torch
            # DataLoader alone, 16 workers) with a short warm-up: one unmeasured window-length
            # stretch first, so the span starts in the loader's steady state
            heartbeat.beat("settling")
            for _ in range(settle_steps):
                trainer.step(batches)
        inject_fault(case, ctx)
        slowdown_pct = float(os.environ.get(SLOWDOWN_VAR) or 0)
        pause_s = step_estimate_s * slowdown_pct / 100.0
        span = timed_span(trainer, batches, timer, steps, case.repeats, sampler, pause_s)
        heartbeat.beat("after the windows")
        extra = extra_windows.run(case, ctx, trainer, batches, timer, steps)
        if case.compile and not case.loader_only:
            dtypes = compiled_dtypes(trainer, batches)
            check_label(case, dtypes)
            if case.compile in CUDA_GRAPH_MODES and cuda_graph_skips():
                raise LabelMismatch(f"compile={case.compile} means CUDA graphs, but Inductor ran "
                                    f"{cuda_graph_skips()} compiled graph(s) without them")
        loss = float(trainer.last_loss.detach().float()) * case.accumulation_steps
        return {
            **span, "images": [per_step_images * steps] * case.repeats, "steps_per_window": steps,
            "step_estimate_s": step_estimate_s, "injected_slowdown_pct": slowdown_pct,
            "first_step_s": first_step_s, "warmup_steps_run": warmup_run, "settle_steps_run": settle_steps,
            "prefetched_batches_drained": drained,
            "compute_dtypes": dtypes, "math_flags": trainer.math_flags,
            "allreduce_calls_per_step": None, "last_loss": loss,
            "gpu_samples": sampler.summary() if sampler else {}, **extra,
            **peak_memory(ctx), **trainer.strategy.facts(), **loader.facts(),
        }
    finally:
        loader.close()


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


def timed_span(trainer, batches, timer: StepTimer, steps: int, windows: int, sampler=None,
               pause_s: float = 0.0) -> dict:
    """`windows` measured windows of `steps` steps each, run back to back as one span: every rank
    opens it together and it is device-synchronised at both edges only, so no pause between windows
    lets a loader refill its queue. Each window's seconds are the sum of its steps' times (CUDA events
    on a GPU), and its data wait and input stall are its own steps'."""
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
    cpu = [host_cpu.read()]
    timer.start()
    for w in range(windows):
        phase = f"window {w + 1} of {windows}"
        for step in range(steps):
            heartbeat.beat(phase, step)
            waits.append(trainer.step(batches))
            timer.mark()
            if pause_s:  # an injected slowdown: the device idles for the pause, whatever was queued
                synchronize(timer.ctx)
                time.sleep(pause_s)
        cpu.append(host_cpu.read())
    span_s, step_times = timer.stop()
    stalls = probe.stop() if probe else None
    if sampler:
        sampler.stop()
    step_chunks = split(step_times, steps, windows)
    fetches_per_step = trainer.case.accumulation_steps
    return {"windows_s": [sum(c) for c in step_chunks], "step_times_s": step_chunks, "span_s": span_s,
            "data_wait_s": [sum(c) for c in split(waits, steps, windows)],
            "input_stall_s": [sum(c) for c in split(stalls, steps * fetches_per_step, windows)] if probe else None,
            **host_cpu.over_windows(cpu)}


def timed_window(trainer, batches, timer: StepTimer, steps: int) -> float:
    """One unpaused window on its own (the extra windows); its seconds."""
    return timed_span(trainer, batches, timer, steps, 1)["windows_s"][0]


def redirect_stderr(out: Path, rank: int) -> Path:
    """Send this rank's fd 2 to a file, so even a hard crash leaves its last lines behind."""
    path = out / f"rank{rank}.stderr"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    return path


def run_rank(case: Case, out: Path) -> int:
    rank = int(os.environ.get("RANK", 0))
    redirect_stderr(out, rank)
    heartbeat.path = out / f"rank{rank}.heartbeat"
    heartbeat.beat("start-up")
    record = {"rank": rank, "status": "ok", "reason": "", "pid": os.getpid(),
              "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    try:
        ctx = from_environment(case)
        record["device"] = str(ctx.device)
        if case.launcher == "torchrun":
            dist.init_process_group("nccl" if case.device == "cuda" else "gloo")
        record.update(measure(case, ctx))
    except loaders.SkipCase as e:
        record.update(status="skipped", reason=str(e))
    except Exception as e:
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        if is_oom(e):  # on every device, CPU allocation failures included
            unit = "GPU" if case.device == "cuda" else "rank"
            record.update(status="oom", reason=f"out of memory at batch_size={case.batch_size} per {unit}: "
                                               f"{str(e).splitlines()[0][:300]}")
        else:
            record.update(status="error", reason=f"{e.__class__.__name__}: {e}"[:500],
                          traceback_tail=tb.splitlines()[-15:])
    _write(out / f"rank{rank}.json", record)
    if record["status"] == "ok" and dist.is_initialized():
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, record)  # across nodes, so rank 0 can merge every rank
        if rank == 0:
            _write(out / "ranks.json", {"ranks": gathered})
        dist.destroy_process_group()
    return 0 if record["status"] in ("ok", "skipped") else 1


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


def main(argv=None) -> int:
    parent = os.getppid()
    # the launcher (or torchrun) dying for any reason, SIGKILL included, takes this rank with it
    lifeline.die_with_parent()
    if lifeline.orphaned(parent):
        return 1
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--case", required=True, help="case JSON file")
    p.add_argument("--out", required=True, help="folder for this case's per-rank records")
    a = p.parse_args(argv)
    case = Case.from_dict(json.loads(Path(a.case).read_text()))
    return run_rank(case, Path(a.out))


if __name__ == "__main__":
    sys.exit(main())
