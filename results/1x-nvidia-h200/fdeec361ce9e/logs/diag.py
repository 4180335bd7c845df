"""Where DALI's throughput goes while a CUDA-graphed training step keeps the GPU busy (diagnostic only).

python3 diag.py DATA_DIR [BATCH]
Prints one JSON line per variant: images/s fed, host wait share; plus synthetic and DALI-alone rates.
"""
import gc
import glob
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.base_iterator import LastBatchPolicy
from nvidia.dali.plugin.pytorch import DALIGenericIterator, feed_ndarray, to_torch_type

DATA = sys.argv[1]
B = int(sys.argv[2]) if len(sys.argv) > 2 else 256
ONLY = sys.argv[3].split(",") if len(sys.argv) > 3 else None
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
classes = sorted(os.listdir(DATA))
files, labels = [], []
for i, c in enumerate(classes):
    for f in sorted(glob.glob(os.path.join(DATA, c, "*.jpg"))):
        files.append(f)
        labels.append(i)
print("files", len(files), flush=True)
dev = torch.device("cuda", 0)


def build(threads=15, depth=2, shard=(0, 1), u8=False, antialias=True, seed=1, hw=0.99, prealloc=False, dev="mixed",
          **pkw):
    @pipeline_def(batch_size=B, num_threads=threads, device_id=0, seed=seed, prefetch_queue_depth=depth, **pkw)
    def pipe():
        jpegs, lab = fn.readers.file(files=files, labels=labels, shard_id=shard[0], num_shards=shard[1],
                                     random_shuffle=True, name="Reader")
        hints = dict(preallocate_width_hint=640, preallocate_height_hint=500) if prealloc else {}
        share = dict(hw_decoder_load=hw) if dev == "mixed" else {}
        images = fn.decoders.image(jpegs, device=dev, output_type=types.RGB, **share, **hints)
        images = fn.random_resized_crop(images, size=[224, 224], random_area=[0.08, 1.0],
                                        random_aspect_ratio=[0.75, 4 / 3], antialias=antialias)
        if dev == "cpu":
            images = images.gpu()
        if not u8:
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, mean=MEAN, std=STD, output_layout="HWC",
                                              mirror=fn.random.coin_flip(probability=0.5))
        return images, lab.gpu()
    p = pipe()
    p.build()
    return p


def host_iter(p):
    it = DALIGenericIterator([p], ["images", "labels"], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
    while True:
        for out in it:
            yield out[0]["images"], out[0]["labels"]


def stream_iter(p):
    held = []
    while True:
        s = torch.cuda.current_stream(dev)
        outs = p.run(s)
        res = []
        for tl in outs:
            d = tl.as_tensor()
            t = torch.empty(d.shape(), dtype=to_torch_type[d.dtype], device=dev)
            res.append(feed_ndarray(d, t, cuda_stream=s))
        held = (held + [outs])[-2:]
        yield res[0], res[1]


def alternate(*its):
    while True:
        for it in its:
            yield next(it)


model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
scaler = torch.amp.GradScaler("cuda")
sx = torch.randn(B, 3, 224, 224, device=dev, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
sy = torch.randint(0, 1000, (B,), device=dev)
mean_t = torch.tensor(MEAN, device=dev, dtype=torch.float16).view(1, 3, 1, 1)
std_t = torch.tensor(STD, device=dev, dtype=torch.float16).view(1, 3, 1, 1)


def body():
    with torch.autocast("cuda", torch.float16):
        loss = F.cross_entropy(model(sx), sy)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        body()
torch.cuda.current_stream().wait_stream(side)
opt.zero_grad(set_to_none=True)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    body()
torch.cuda.synchronize()


def eager_step():
    opt.zero_grad(set_to_none=True)
    body()


def to_input(x, u8):
    x = x.permute(0, 3, 1, 2)
    if u8:
        flip = torch.rand(x.shape[0], device=dev) < 0.5
        x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
        sx.copy_((x.half() - mean_t) / std_t)
    else:
        sx.copy_(x)


def run(name, it=None, u8=False, steps=60, warm=15, step=g.replay, own=False):
    if ONLY and name not in ONLY:
        return
    if own:  # the same loop on a stream of its own, never the legacy default stream
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            return run(name, it, u8, steps, warm, step, own=False)
    wait = 0.0
    for i in range(warm + steps):
        if i == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            wait = 0.0
        if it is not None:
            a = time.perf_counter()
            x, y = next(it)
            wait += time.perf_counter() - a
            to_input(x, u8)
            sy.copy_(y.view(-1).long())
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({"variant": name, "batch": B, "images_per_s": round(steps * B / dt, 1),
                      "host_wait_pct": round(100 * wait / dt, 1)}), flush=True)


def alone(name, it, steps=60, warm=10):
    if ONLY and name not in ONLY:
        return
    for i in range(warm + steps):
        if i == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        next(it)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({"variant": name, "batch": B, "images_per_s": round(steps * B / dt, 1)}), flush=True)


def want(name):
    return not ONLY or name in ONLY


def attempt(fn_, *a, **k):
    try:
        fn_(*a, **k)
    except Exception as e:  # a variant that cannot run says why and the rest go on
        print(json.dumps({"variant": str(a[0]) if a else "?", "error": repr(e)[:300]}), flush=True)
    gc.collect()


if want("synthetic-graph"):
    attempt(run, "synthetic-graph")
if want("synthetic-eager"):
    attempt(run, "synthetic-eager", step=eager_step)
if want("dali-alone"):
    attempt(alone, "dali-alone", host_iter(build()))
if want("graph-fed-base"):
    attempt(run, "graph-fed-base", host_iter(build()))
if want("eager-fed-base"):
    attempt(run, "eager-fed-base", host_iter(build()), step=eager_step)
if want("graph-fed-depth4"):
    attempt(run, "graph-fed-depth4", host_iter(build(depth=4)))
if want("graph-fed-2pipes"):
    attempt(run, "graph-fed-2pipes", alternate(host_iter(build(threads=8, shard=(0, 2))),
                                               host_iter(build(threads=8, shard=(1, 2), seed=2))))
if want("graph-fed-3pipes"):
    attempt(run, "graph-fed-3pipes", alternate(*[host_iter(build(threads=5, shard=(k, 3), seed=k + 1)) for k in range(3)]))
if want("graph-fed-u8"):
    attempt(run, "graph-fed-u8", host_iter(build(u8=True)), u8=True)
if want("graph-fed-2pipes-u8"):
    attempt(run, "graph-fed-2pipes-u8", alternate(host_iter(build(threads=8, shard=(0, 2), u8=True)),
                                                  host_iter(build(threads=8, shard=(1, 2), seed=2, u8=True))), u8=True)
if want("graph-fed-noaa"):
    attempt(run, "graph-fed-noaa", host_iter(build(antialias=False)))
if want("graph-fed-stream-depth4"):
    attempt(run, "graph-fed-stream-depth4", stream_iter(build(depth=4)))
if want("graph-fed-legacy-exec"):
    attempt(run, "graph-fed-legacy-exec", host_iter(build(depth={"cpu_size": 4, "gpu_size": 2}, exec_dynamic=False)))
if want("graph-fed-hw1"):
    attempt(run, "graph-fed-hw1", host_iter(build(hw=1.0)))
if want("graph-fed-own"):
    attempt(run, "graph-fed-own", host_iter(build()), own=True)
if want("eager-fed-own"):
    attempt(run, "eager-fed-own", host_iter(build()), step=eager_step, own=True)
if want("graph-fed-prealloc"):
    attempt(run, "graph-fed-prealloc", host_iter(build(prealloc=True)))
if want("graph-fed-own-stream"):
    attempt(run, "graph-fed-own-stream", stream_iter(build()), own=True)
if want("synthetic-graph-own"):
    attempt(run, "synthetic-graph-own", own=True)
if want("dali-cpu-alone"):
    attempt(alone, "dali-cpu-alone", host_iter(build(threads=14, dev="cpu")))
if want("graph-fed-cpu"):
    attempt(run, "graph-fed-cpu", host_iter(build(threads=14, dev="cpu")))
if want("graph-fed-hybrid"):
    attempt(run, "graph-fed-hybrid", alternate(host_iter(build(threads=4, shard=(0, 2))),
                                               host_iter(build(threads=11, shard=(1, 2), seed=2, dev="cpu"))))
if want("synthetic-graph-again"):
    attempt(run, "synthetic-graph-again")
