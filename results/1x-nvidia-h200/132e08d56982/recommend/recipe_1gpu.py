#!/usr/bin/env python3
"""ResNet training on 1 GPU(s): the fastest configuration the suite found.

Measured by the benchmark suite on 1x-nvidia-h200, commit 132e08d56982, run 20261201T114253Z-f19d:
  7,264.7 images/s (95% interval 7,162.4-7,367.0)
Settings: single, fp16, NHWC, compile:default/step, SGD fused, synthetic, batch 256.

Run it as it was measured:
  python recipe_1gpu.py
It warms up, then prints the images/s of each timed window and their median. The input is one
synthetic batch made once on the device, as in the measurement; feed your own loader for real data.
"""
import argparse
import contextlib
import os
import statistics
import time

import torch
import torch.distributed as dist
import torchvision

S = {
    'model': 'resnet50',
    'num_classes': 1000,
    'image_size': 224,
    'device': 'cuda',
    'gpus': 1,
    'strategy': 'single',
    'batch_size': 256,
    'precision': 'fp16',
    'channels_last': True,
    'cudnn_benchmark': True,
    'compile': 'default',
    'compile_scope': 'step',
    'optimizer_impl': 'fused',
    'bucket_cap_mb': 25.0,
    'gradient_as_bucket_view': False,
    'static_graph': False,
    'broadcast_buffers': True,
    'seed': 0,
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=int, default=5, help="steps before timing (compilation, autotuning)")
    p.add_argument("--steps", type=int, default=50, help="steps per timed window")
    p.add_argument("--windows", type=int, default=3, help="timed windows")
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
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(S["precision"])
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format

    torch.manual_seed(S["seed"])
    model = torchvision.models.get_model(S["model"], weights=None, num_classes=S["num_classes"])
    model = model.to(device, memory_format=fmt).train()
    params = model.parameters()
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=S["bucket_cap_mb"],
            gradient_as_bucket_view=S["gradient_as_bucket_view"], static_graph=S["static_graph"],
            broadcast_buffers=S["broadcast_buffers"])
    criterion = torch.nn.CrossEntropyLoss()
    if S["compile"] and S["compile_scope"] == "model":
        model = torch.compile(model, mode=S["compile"])

    def loss_of(images, labels):
        autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with autocast:
            return criterion(model(images), labels)

    if S["compile"] and S["compile_scope"] == "step":  # forward and loss as one compiled graph
        loss_of = torch.compile(loss_of, mode=S["compile"])
    impl = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}[S["optimizer_impl"]]
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
    sync()
    rates = []
    for w in range(a.windows):
        if ddp:
            dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        sync()
        elapsed = torch.tensor([time.perf_counter() - t0])
        if ddp:  # the slowest rank decides
            elapsed = elapsed.to(device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        rate = S["batch_size"] * world * a.steps / float(elapsed)
        rates.append(rate)
        if rank == 0:
            print(f"window {w + 1}: {rate:,.1f} images/s", flush=True)
    if rank == 0:
        print(f"images/s: {statistics.median(rates):.1f} (median of {a.windows} window(s) of {a.steps} steps, "
              f"{world} process(es))", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
