#!/usr/bin/env python3
"""ResNet training on 1 GPU(s) fed by JPEGs through NVIDIA DALI: the fastest the suite found.

Measured by the benchmark suite on 1x-nvidia-h200, commit 603258ccb954, run 20261205T051559Z-8b58:
  7,135.0 images/s (95% interval 7,021.4-7,248.6)
Settings: single, fp16, NHWC, compile:default/step, SGD fused, 32 CUDA connections, dali/mixed/tauto/hw-auto/whole-decode, batch 512.

Run it as it was measured:
  python recipe_1gpu_jpeg.py --data DIR
It warms up, then prints the images/s of each timed window and of the whole span they make.
It reads the ImageFolder tree given by --data (ROOT/<class>/<image>.jpg) through NVIDIA DALI, as measured.
"""
import argparse
import contextlib
import inspect
import os
import time

# read by the driver when CUDA starts: the streams spread over this many hardware work queues
os.environ['CUDA_DEVICE_MAX_CONNECTIONS'] = '32'

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
    'batch_size': 512,
    'precision': 'fp16',
    'channels_last': True,
    'input_channels': 3,
    'cudnn_benchmark': True,
    'cudnn_benchmark_limit': 10,
    'compile': 'default',
    'compile_scope': 'step',
    'compile_wrapper': 'python',
    'inductor_options': '',
    'optimizer_impl': 'fused',
    'cuda_graph': False,
    'step_stream': 'default',
    'bucket_cap_mb': 25.0,
    'gradient_as_bucket_view': False,
    'static_graph': False,
    'broadcast_buffers': True,
    'seed': 0,
    'cuda_max_connections': 32,
    'loader': 'dali',
    'dali_device': 'mixed',
    'hw_decoder_load': 0.99,
    'dali_threads': -1,
    'dali_prefetch_depth': 2,
    'dali_handoff': 'host',
    'dali_crop': 'resize',
    'dali_cpu_share': 0.0,
}
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def image_folder(root):
    """(files, labels) of an ImageFolder tree: ROOT/<class>/<image>.jpg, one label per class folder."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files, labels = [], []
    for i, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith((".jpg", ".jpeg")):
                files.append(os.path.join(root, c, f))
                labels.append(i)
    if not files:
        raise SystemExit(f"no JPEG files under {root}/<class>/; expected an ImageFolder tree")
    return files, labels


def cores_per_process():
    """This machine's cores shared over the processes on it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


def batches(device, rank, world, root):
    """NVIDIA DALI: read, decode whole images (on the GPU, its hardware decoders taking the share set below), resize the random crop, flip and normalise, delivered in the
    layout and dtype the model reads first, sharded by rank; with a CPU share, a second pipeline decodes
    that share of each batch on the CPU and the two parts are joined on the device."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    files, labels = image_folder(root)
    threads = S["dali_threads"] if S["dali_threads"] > 0 else cores_per_process()
    on_gpu = device.type == "cuda"
    out_dtype = types.FLOAT16 if S["precision"] == "fp16" and on_gpu else types.FLOAT

    def pipeline(files, labels, batch, decode_on, threads, seed):
        @pipeline_def(batch_size=batch, num_threads=threads, device_id=device.index if on_gpu else None,
                      seed=seed, prefetch_queue_depth=S["dali_prefetch_depth"])
        def pipe():
            jpegs, lab = fn.readers.file(files=files, labels=labels, shard_id=rank, num_shards=world,
                                         random_shuffle=True, name="Reader")
            share = {"hw_decoder_load": S["hw_decoder_load"]} if decode_on == "mixed" else {}
            window, size = dict(random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3]), S["image_size"]
            if S["dali_crop"] == "decoder":  # the decoder reads only the crop's region of each JPEG
                images = fn.resize(fn.decoders.image_random_crop(jpegs, device=decode_on, output_type=types.RGB,
                                                                 **window, **share), resize_x=size, resize_y=size)
            else:  # whole images decoded (what hardware JPEG decoders take), then cropped and resized at once
                images = fn.decoders.image(jpegs, device=decode_on, output_type=types.RGB, **share)
                images = fn.random_resized_crop(images, size=[size, size], **window)
            images = images.gpu() if on_gpu and decode_on == "cpu" else images  # normalised on the GPU
            images = fn.crop_mirror_normalize(images, dtype=out_dtype, mean=MEAN, std=STD,
                                              output_layout="HWC" if S["channels_last"] else "CHW",
                                              pad_output=S["input_channels"] == 4,  # a zero 4th channel
                                              mirror=fn.random.coin_flip(probability=0.5))
            return images, lab.gpu() if on_gpu else lab

        p = pipe()
        p.build()
        return p

    if S["dali_cpu_share"] > 0:
        # the CPU's share of each batch from files of its own (spread over the list), on threads of its own;
        # the hardware decoders need few host threads, and one core stays with the training loop
        cpu_batch = round(S["batch_size"] * S["dali_cpu_share"])
        to_cpu = [int((i + 1) * S["dali_cpu_share"]) > int(i * S["dali_cpu_share"]) for i in range(len(files))]
        gpu_threads = min(4, max(1, threads // 4))
        parts = [([f for f, c in zip(files, to_cpu) if c == cpu], [lab for lab, c in zip(labels, to_cpu) if c == cpu])
                 for cpu in (False, True)]
        pipes = [pipeline(*parts[0], S["batch_size"] - cpu_batch, S["dali_device"], gpu_threads, S["seed"] + rank),
                 pipeline(*parts[1], cpu_batch, "cpu", max(1, threads - gpu_threads - 1), S["seed"] + world + rank)]
    else:
        pipes = [pipeline(files, labels, S["batch_size"], S["dali_device"], threads, S["seed"] + rank)]

    def joined(parts):
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    if on_gpu and S["dali_handoff"] == "stream":
        # outputs bound to the training stream, which waits for DALI on the GPU: the host queues the step at once
        from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type
        held = []  # the last batches' DALI buffers stay referenced while their copies are queued
        while True:
            stream = torch.cuda.current_stream(device)
            outs = [p.run(stream) for p in pipes]
            batch = []
            for name in (0, 1):
                copies = []
                for t in (o[name].as_tensor() for o in outs):
                    out = torch.empty(t.shape(), dtype=to_torch_type[t.dtype], device=device)
                    copies.append(feed_ndarray(t, out, cuda_stream=stream))
                batch.append(joined(copies))
            images, target = batch
            held = (held + [outs])[-2:]
            if S["channels_last"]:
                images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
            yield images, target.reshape(-1).long()

    def epochs(p):
        it = DALIGenericIterator([p], ["images", "labels"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
        while True:
            yield from it

    streams = [epochs(p) for p in pipes]
    while True:
        outs = [next(s)[0] for s in streams]
        images = joined([o["images"] for o in outs])
        if S["channels_last"]:
            images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
        yield images, joined([o["labels"] for o in outs]).reshape(-1).long().to(device, non_blocking=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="ImageFolder tree of JPEGs: ROOT/<class>/<image>.jpg")
    p.add_argument("--warmup", type=int, default=5, help="steps before timing (compilation, autotuning)")
    p.add_argument("--steps", type=int, default=26, help="steps per timed window")
    p.add_argument("--windows", type=int, default=10, help="timed windows")
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
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(S["precision"])
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format

    torch.manual_seed(S["seed"])
    model = torchvision.models.get_model(S["model"], weights=None, num_classes=S["num_classes"])
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
        buffer_sync = {} if S["broadcast_buffers"] else {"forward_sync_buffers" if new_name else "broadcast_buffers": False}
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
    impl = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}[S["optimizer_impl"]]
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9, **impl)
    if S["optimizer_impl"] == "fused":
        # zeroed momentum before the first step (the same update): fused SGD otherwise makes its buffers with
        # empty_like and fills them in the step's kernel, which a step skipped for an fp16 overflow never runs
        for group in optimizer.param_groups:
            for p in group["params"]:
                optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
    scaler = torch.amp.GradScaler(device.type, enabled=S["precision"] == "fp16")
    source = batches(device, rank, world, a.data)

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
            print(f"window {w + 1}: {images / t:,.1f} images/s", flush=True)
        print(f"images/s: {images * a.windows / sum(window_s):.1f} (every image of one span of {a.windows} "
              f"window(s) of {a.steps} steps over its time, {world} process(es))", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
