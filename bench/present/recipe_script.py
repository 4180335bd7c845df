"""The text of a recipe script (present/recipe.py fills it): its head and a plain PyTorch training loop with
the measured settings and the suite's timing; its input is recipe_inputs.py's. Braces that the script itself
uses are doubled."""
from __future__ import annotations

HEAD = '''#!/usr/bin/env python3
"""{title}

Measured by the benchmark suite on {machine}, commit {commit}, run {run_id}:
  {measured}
Settings: {label}.

Run it as it was measured:
  {how}
It warms up, then prints the images/s of each timed window and of the whole span they make.
{input_note}
"""
import argparse
import contextlib
import inspect
import os
import sys
import time
{queues}
import torch
import torch.distributed as dist
import torchvision

S = {settings}
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
'''

MAIN = '''

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    {data_arg}
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
        if S["step_stream"] == "own":
            # everything from here on a stream of this process's own, never CUDA's legacy default stream:
            # a loader's GPU work then neither waits for the queued steps nor holds them up
            torch.cuda.set_stream(torch.cuda.Stream(device))
    else:
        device = torch.device("cpu")

    # fp32 means strict fp32: TF32 only where the precision says so
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = S["precision"] == "tf32"
    torch.backends.cudnn.benchmark = S["cudnn_benchmark"]
    if device.type == "cuda":  # how many algorithms cuDNN times per convolution, its heuristics' first (0: all)
        torch.backends.cudnn.benchmark_limit = S["cudnn_benchmark_limit"]
    amp_dtype = {{"bf16": torch.bfloat16, "fp16": torch.float16}}.get(S["precision"])
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format

    torch.manual_seed(S["seed"])
{build_model}
    if S["input_channels"] > 3:
        # the stem reads RGB and zero channels (the loader adds them): zero weights there, the same training,
        # and NHWC pixels of 8 bytes in fp16, which the stem's convolution kernels handle better than 6
        rgb = model.conv1
        model.conv1 = torch.nn.Conv2d(S["input_channels"], rgb.out_channels, rgb.kernel_size, rgb.stride, rgb.padding,
                                      bias=False)
        with torch.no_grad():
            model.conv1.weight.zero_()[:, :3].copy_(rgb.weight)
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
    if S["compile"]:  # the code that launches the compiled kernels: Python, or C++ (less host time a launch)
        import torch._inductor.config as inductor_config
        inductor_config.cpp_wrapper = S["compile_wrapper"] == "cpp"
        for name in filter(None, S["inductor_options"].split(",")):  # Inductor settings turned on, by their own names
            setattr(inductor_config, name, True)
    if S["compile"] and S["compile_scope"] == "model":
        model = torch.compile(model, mode=S["compile"])

    def loss_of(images, labels):
        # a captured step casts the weights afresh on every replay: no autocast cache across steps
        autocast = (torch.autocast(device.type, dtype=amp_dtype, cache_enabled=not S["cuda_graph"]) if amp_dtype
                    else contextlib.nullcontext())
        with autocast:
            return criterion(model(images), labels)

    if S["compile"] and S["compile_scope"] == "step":  # forward and loss as one compiled graph
        loss_of = torch.compile(loss_of, mode=S["compile"])
    impl = {{"default": {{}}, "foreach": {{"foreach": True}}, "fused": {{"fused": True}}}}[S["optimizer_impl"]]
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9, **impl)
    if S["optimizer_impl"] == "fused":
        # zeroed momentum before the first step (the same update): fused SGD otherwise makes its buffers with
        # empty_like and fills them in the step's kernel, which a step skipped for an fp16 overflow never runs
        for group in optimizer.param_groups:
            for p in group["params"]:
                optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
    scaler = torch.amp.GradScaler(device.type, enabled=S["precision"] == "fp16")
    source = {source}

    def update(images, labels):
        loss = loss_of(images, labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    def eager_step():
        update(*next(source))
        optimizer.zero_grad(set_to_none=True)

    step = eager_step
    if S["cuda_graph"]:
        # the whole step as one CUDA graph: a few eager steps on a side stream first (autotuning,
        # compilation, optimizer state), then one capture with the gradients unset, so they live in the
        # graph's memory; every later batch is copied into the graph's input tensors
        images, labels = next(source)
        # the graph reads fixed tensors: the synthetic batch itself, else copies each batch is written into
        synthetic = S["loader"] == "synthetic"
        static_images, static_labels = (images, labels) if synthetic else (images.clone(), labels.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                update(static_images, static_labels)
        torch.cuda.current_stream().wait_stream(side)
        optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            update(static_images, static_labels)

        def step():
            images, labels = next(source)
            if images is not static_images:
                static_images.copy_(images, non_blocking=True)
                static_labels.copy_(labels, non_blocking=True)
            graph.replay()

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
