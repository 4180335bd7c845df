"""The winner of `bench recommend` as a training script to copy: a plain PyTorch loop with exactly the
measured settings, which times itself the way the suite does (warm-up first, the windows back to back
as one span synchronised at its edges, the slowest rank's time) and prints its own images/s.

The script trains on one synthetic batch made once on the device, as the measured case did; it needs
torch and torchvision only.
"""
from __future__ import annotations

from pathlib import Path

from ..core.case import Case

RECIPE_KNOBS = ("model", "num_classes", "image_size", "device", "gpus", "strategy", "batch_size", "precision",
                "channels_last", "cudnn_benchmark", "compile", "compile_scope", "optimizer_impl", "bucket_cap_mb",
                "gradient_as_bucket_view", "static_graph", "broadcast_buffers", "seed")

TEMPLATE = '''#!/usr/bin/env python3
"""{title}

Measured by the benchmark suite on {machine}, commit {commit}, run {run_id}:
  {measured}
Settings: {label}.

Run it as it was measured:
  {how}
It warms up, then prints the images/s of each timed window and of the whole span they make. The
input is one synthetic batch made once on the device, as in the measurement; feed your own loader
for real data.
"""
import argparse
import contextlib
import inspect
import os
import time

import torch
import torch.distributed as dist
import torchvision

S = {settings}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default={warmup}, help="steps before timing (compilation, autotuning)")
    p.add_argument("--steps", type=int, default={steps}, help="steps per timed window")
    p.add_argument("--windows", type=int, default={windows}, help="timed windows")
    a = p.parse_args()

    ddp = S["strategy"] == "ddp"
    if ddp:
        dist.init_process_group("nccl" if S["device"] == "cuda" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    if S["device"] == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")

    # fp32 means strict fp32: TF32 only where the precision says so
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = S["precision"] == "tf32"
    torch.backends.cudnn.benchmark = S["cudnn_benchmark"]
    amp_dtype = {{"bf16": torch.bfloat16, "fp16": torch.float16}}.get(S["precision"])
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format

    torch.manual_seed(S["seed"])
    model = torchvision.models.get_model(S["model"], weights=None, num_classes=S["num_classes"])
    model = model.to(device, memory_format=fmt).train()
    params = model.parameters()
    if ddp:
        DDP = torch.nn.parallel.DistributedDataParallel
        # buffers sync in every forward by default; torch 2.14 renamed the keyword that turns it off
        new_name = "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters
        buffer_sync = {{}} if S["broadcast_buffers"] else {{"forward_sync_buffers" if new_name else "broadcast_buffers": False}}
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=S["bucket_cap_mb"],
                    gradient_as_bucket_view=S["gradient_as_bucket_view"], static_graph=S["static_graph"], **buffer_sync)
    criterion = torch.nn.CrossEntropyLoss()
    if S["compile"] and S["compile_scope"] == "model":
        model = torch.compile(model, mode=S["compile"])

    def loss_of(images, labels):
        autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with autocast:
            return criterion(model(images), labels)

    if S["compile"] and S["compile_scope"] == "step":  # forward and loss as one compiled graph
        loss_of = torch.compile(loss_of, mode=S["compile"])
    impl = {{"default": {{}}, "foreach": {{"foreach": True}}, "fused": {{"fused": True}}}}[S["optimizer_impl"]]
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9, **impl)
    scaler = torch.amp.GradScaler(device.type, enabled=S["precision"] == "fp16")

    g = torch.Generator().manual_seed(S["seed"] + rank)
    images = torch.randn(S["batch_size"], 3, S["image_size"], S["image_size"], generator=g)
    images = images.to(device).contiguous(memory_format=fmt)
    labels = torch.randint(0, S["num_classes"], (S["batch_size"],), generator=g).to(device)

    def step():
        loss = loss_of(images, labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(a.warmup):
        step()
    # the windows run back to back as one span, synchronised at its edges only (no pause between
    # windows for a loader to catch up); each window's time comes from events on the device
    if ddp:
        dist.barrier()
    sync()
    cuda = device.type == "cuda"
    events = [torch.cuda.Event(enable_timing=True) for _ in range(a.windows + 1)] if cuda else []
    clock = []

    def mark(i):
        if cuda:
            events[i].record()
        else:  # the CPU runs each step to its end before the next
            clock.append(time.perf_counter())

    mark(0)
    for w in range(a.windows):
        for _ in range(a.steps):
            step()
        mark(w + 1)
    sync()
    if cuda:
        window_s = [events[i].elapsed_time(events[i + 1]) / 1000.0 for i in range(a.windows)]
    else:
        window_s = [b - e for e, b in zip(clock, clock[1:])]
    window_s = torch.tensor(window_s, dtype=torch.float64)
    if ddp:  # the slowest rank decides each window
        window_s = window_s.to(device)
        dist.all_reduce(window_s, op=dist.ReduceOp.MAX)
    window_s = window_s.tolist()
    images = S["batch_size"] * world * a.steps
    if rank == 0:
        for w, t in enumerate(window_s):
            print(f"window {{w + 1}}: {{images / t:,.1f}} images/s", flush=True)
        print(f"images/s: {{images * a.windows / sum(window_s):.1f}} (every image of one span of {{a.windows}} "
              f"window(s) of {{a.steps}} steps over its time, {{world}} process(es))", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def file_name(gpus: int) -> str:
    return f"recipe_{gpus}gpu.py"


def command(case: Case, path: str) -> str:
    if case.strategy == "ddp":
        return f"torchrun --standalone --nproc-per-node {case.gpus} {path}"
    return f"python {path}"


def render(case: Case, record: dict, label: str) -> str:
    """The script for this case; `record` is the measured figure it reproduces."""
    m = record["metrics"]
    ci = m.get("images_per_s_ci95")
    measured = f"{m['images_per_s']:,.1f} images/s" + (f" (95% interval {ci[0]:,.1f}-{ci[1]:,.1f})" if ci else "")
    settings = "{\n" + "".join(f"    {k!r}: {getattr(case, k)!r},\n" for k in RECIPE_KNOBS) + "}"
    unit = "GPU" if case.device == "cuda" else "CPU process"
    return TEMPLATE.format(
        title=f"ResNet training on {case.gpus} {unit}(s): the fastest configuration the suite found.",
        machine=record["machine"], commit=record["commit_folder"], run_id=record["run_id"], measured=measured,
        label=label, how=command(case, file_name(case.gpus)), settings=settings,
        warmup=max(case.warmup_steps, 3), steps=m.get("steps_per_window") or case.steps, windows=case.repeats)


def write(case: Case, record: dict, label: str, folder: Path) -> Path:
    """Write the recipe beside the results; an earlier run's recipe for the same GPU count is kept
    under its run id rather than replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(case.gpus)
    if path.exists():
        old = path.read_text()
        run = next((ln.split("run ")[-1].rstrip(":") for ln in old.splitlines() if ", run " in ln), "earlier")
        path.rename(path.with_name(f"{path.stem}.{run}.py"))
    path.write_text(render(case, record, label))
    return path
