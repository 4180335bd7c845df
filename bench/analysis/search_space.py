"""What `bench recommend` tries: where the search starts, the knobs it walks stage by stage, and the
loaders and loader knobs that feed the winner with JPEGs."""
from __future__ import annotations

from ..core import procfs, recipes
from ..core.case import AUTO, Case
from .search_records import figure

SWEEP = "recommend"


def start_case(base: Case, gpus: int, native_bf16: bool | None = None) -> Case:
    """Where the search starts: the suite's best known set-up at this GPU count (the `best` recipe); on a CPU
    that does not compute bf16 itself (`native_bf16`, read from this host where not given), fp32. On a 2-core
    AVX2 CPU, ResNet-18 at batch 8 stepped in 326.1 ms in emulated bf16 with NHWC against 136.2 ms in fp32, and
    a 30 s budget that started in bf16 measured the start alone and one candidate. The precision stage tries
    bf16 there all the same."""
    start = recipes.best(base, gpus).replace(name=f"{SWEEP}-start")
    if start.device == "cpu" and not (procfs.native_bf16() if native_bf16 is None else native_bf16):
        start = start.replace(precision="fp32", channels_last=False)
    return start


def stages(start: Case, with_compile: bool = True) -> list[tuple[str, list[dict] | object]]:
    """The knobs searched, each entry one change to the current best (or, for the batch, `next_batch`
    and later `larger_batch`, which pick each next size from what won so far): the cheap eager one,
    compilation (on one H200 compiled forward + loss ran 6,592 images/s against 5,819 eager, default
    SGD), the batch (there 7,111 at 256, 7,248 at 384, 7,473 at 512; 2x first), the whole step as one
    CUDA graph on the batch that won, then how the kernels are chosen (the `kernels` stage: the input
    padded to 4 channels for the stem's convolution, every cuDNN algorithm timed), a batch beyond 2x
    where 2x won, the other compile scope, precision and DDP's own knobs, so a short budget reaches the
    likeliest gains first. `reduce-overhead` is left out: its CUDA graphs hold forward and backward only,
    and `cuda_graph` captures the optimizer and the loss scaler too."""
    out = [("optimizer", [dict(optimizer_impl="fused")])]
    # DDP's static graph and a compiled model do not mix (pytorch/pytorch#93672)
    unstatic = {"static_graph": False} if start.strategy == "ddp" else {}
    if with_compile:
        out.append(("compile", [dict(compile="default", compile_scope="step", **unstatic)]))
    out.append(("batch", next_batch))
    if start.device == "cuda" and start.strategy == "single":
        out.append(("graph", [dict(cuda_graph=True, optimizer_impl="fused")]))
    if with_compile and start.device == "cuda":
        out.append(("kernels", [dict(input_channels=4)]
                    + [dict(inductor_options=name) for name in INDUCTOR_OPTIONS_TRIED]
                    + [dict(cudnn_benchmark_limit=0)]))
    out.append(("batch", larger_batch))
    if with_compile and start.device == "cuda":
        # the compiled step's kernels launched from C++: on one H200 the compiled step at batch 128 took
        # 34.4 ms with the GPU busy in 56% of samples, so its host needed about that long to queue it
        out.append(("wrapper", [dict(compile_wrapper="cpp")]))
    if with_compile:  # the other scope, after the changes that paid more
        out.append(("compile", [dict(compile="default", compile_scope="model", **unstatic)]))
    precisions = ("fp16", "bf16") if start.device == "cuda" else ("bf16", "fp32")
    out.append(("precision", [dict(precision=p, channels_last=cl) for p in precisions for cl in (True, False)]))
    if start.strategy == "ddp":
        out.append(("ddp", [dict(gradient_as_bucket_view=True), dict(static_graph=True),
                            dict(bucket_cap_mb=start.bucket_cap_mb * 4)]))
    return out


def next_batch(start: int, best: int, tried: list[int]) -> int | None:
    """The next per-GPU batch to try, or None: 2x the start first, 1.5x only where 2x did not win, half
    the start only where no larger batch won. Larger ones wait for `larger_batch`. On one H200 the compiled
    step ran 7,359.2 images/s at 512 against 7,084.1 at 384 (7,280.3 against 7,017.1 in another run):
    trying 384 first cost a compilation that 512 made moot."""
    if start * 2 not in tried:
        return start * 2
    if best == start and start * 3 // 2 not in tried:
        return start * 3 // 2
    if best == start and start // 2 >= 1 and start // 2 not in tried:
        return start // 2
    return None


def larger_batch(start: int, best: int, tried: list[int]) -> int | None:
    """After the graph and kernel stages: 3x and then 4x the start while the largest batch tried is the
    best (a larger batch keeps paying on a large GPU until the memory or the kernels' shapes stop it).
    Not before them: on one H200 the compiled step at 768 ran within noise of 512 in four runs (-0.3%,
    +0.0%, +0.2%, -0.8%) and its first compilation took 75 s of a 292 s share, where the step as one CUDA
    graph (+0.6%, +1.1%) and the 4-channel input were then left for budget."""
    if not tried or best != max(tried):
        return None
    return next((b for b in (start * 3, start * 4) if b not in tried), None)


INDUCTOR_OPTIONS_TRIED = ()
"""The Inductor settings the `kernels` stage tries, one at a time, on a GPU: none now. On one H200 the
compiled step at batch 512 runs at the power cap, so what pays is less work and memory traffic per
image; there ResNet-50's 1x1 convolutions as matrix multiplies (`conv_1x1_as_mm`) moved it by +0.7%,
-0.1% and +0.2% in three single processes, each within noise, while its compilation could take 52 s of
the budget; `coordinate_descent_tuning` was still compiling after 162 s."""

LEAN_DALI_THREADS = 4
"""DALI's threads in the lean candidate, beside the machine's cores: with whole images decoded, on one
H200 DALI alone delivered 18,028.7 images/s on 4 threads (19,512.7 on 16), far above what a step takes."""
CPU_DECODE_SHARE = 0.3
"""The share of each batch the fed search has decoded on the CPU, in a second DALI pipeline: on one H200
DALI decoding on the CPU (14 threads) fed the captured step at its own pace, 3,417.6 images/s against
3,229.6 alone, where GPU decoding cost the step about its own time: 44% of the compiled step's 7,289.0,
less what the GPU-decoding pipeline's threads and the step's own thread take of the 16 cores."""
FED_CUDA_CONNECTIONS = 32
"""The hardware work queues the fed search starts a DALI-fed step's process with, CUDA's most (its default
is 8): DALI's streams then seldom share one with the training stream. On one H200 (12,800 JPEGs, the
compiled step at batch 512) the fed step ran 7,133.8 images/s with them (windows' spread 0.5%, no input
stall) against 6,276.2 with the driver's 8 (spread 11.4%, the device idle 13% of the window for input)."""
LOADER_BUDGET_SHARE = 0.35
"""With a data folder, the part of a GPU count's budget kept for the winner fed by JPEGs."""


def fed_start_crop(device: str) -> str:
    """Where the fed search's DALI candidates cut the random crop unless a candidate changes it: on a GPU
    whole images go to the hardware JPEG engines and are cropped after (`resize`); a region goes to
    DALI's CPU-and-SM decoder: on one H200 DALI alone delivered 19,512.7 images/s decoding whole images
    against 16,135.7 for regions, and the compiled step fed whole images 5,851.7 against 5,357.6. On a
    CPU the decoder decodes the crop alone (`decoder`, the case's default)."""
    return "resize" if device == "cuda" else "decoder"


def fed_start_queues(device: str) -> int:
    """The CUDA work queues the fed search's DALI candidates run with unless a candidate changes them:
    CUDA's most on a GPU (FED_CUDA_CONNECTIONS); on a CPU there are none to set (0)."""
    return FED_CUDA_CONNECTIONS if device == "cuda" else 0


def loader_changes(best: Case, data_dir: str) -> list[tuple[str, dict]]:
    """The winner fed by JPEGs, as (stage, change): DALI first (decoding on the GPU where there is one,
    whole images there, with its hardware decoder's share chosen for the GPU and this machine's cores,
    and CUDA's most hardware work queues), then (on a GPU) a share of each batch decoded on the CPU by a
    second pipeline, DALI on 4 threads, an
    eager step where the winner captured it as a CUDA graph, the torch DataLoader, then DALI's batches
    handed to the training stream, its queue depth, its decoder share and (on a GPU) the crop decoded
    alone and the environment's work queues, one at a time; each over windows long enough for a loader's rounds. What a host-bound fed step
    is tried with comes from `host_bound_changes`. The steps on a stream of their own (`step_stream=own`)
    are not tried: on one H200 the fed step ran 6,364.9 images/s with it against 6,361.2 without."""
    gpu = best.device == "cuda"
    window = recipes.loader_windows(best)
    # threads left at their default (the cores, AUTO): a later knob built on a winner of 4 keeps them
    # a captured step queues hundreds of kernels at once; a DALI stream that shares a hardware queue with it
    # waits for all of them: so on a GPU the fed search starts with CUDA's most queues
    dali = dict(loader="dali", data_dir=data_dir, dali_device="mixed" if gpu else "cpu", **window,
                dali_crop=fed_start_crop(best.device), cuda_max_connections=fed_start_queues(best.device))
    out = [("loader", dali)]
    if gpu:
        # a step that fills the GPU waits for DALI's GPU work but not for its CPU work
        out.append(("loader", dict(dali, dali_cpu_share=CPU_DECODE_SHARE)))
        # there DALI-fed compiled steps at batch 256 ran 78-85% of synthetic, the device idle, no input stall:
        # the host thread queued the step late; DALI's threads, bursting over every core, may delay it
        out.append(("loader", dict(dali, dali_threads=LEAN_DALI_THREADS)))
    if best.cuda_graph:
        # a captured step runs its kernels back to back, leaving DALI's resize and normalisation on the
        # same GPU no gap to run in (on one H200 DALI-fed graph cases sat 21-23% idle for input,
        # eager ones 2%): the same winner with an eager step, fed the same way
        out.append(("loader", dict(dali, cuda_graph=False)))
    out.append(("loader", dict(loader="torch", data_dir=data_dir, num_workers=AUTO, pin_memory=gpu, non_blocking=gpu,
                               persistent_workers=True, **window)))
    if gpu:
        out.append(("loader", dict(dali, dali_handoff="stream")))
    out.append(("loader", dict(dali, dali_prefetch_depth=3)))
    if gpu:
        out.append(("loader", dict(dali, hw_decoder_load=1.0)))
        out.append(("loader", dict(dali, dali_crop="decoder")))  # the crop decoded alone
        out.append(("loader", dict(dali, cuda_max_connections=0)))  # the environment's queues, last
    return out


def host_bound_changes(fed: Case, record: dict | None, candidates: list) -> list[dict]:
    """What may give a fed step its host queues slower than the GPU runs it (diagnosis `host-bound`)
    time back, likeliest first: of the batches the synthetic search measured above the fed step's, the
    fastest, so each launch carries more images; then, for a compiled step on a GPU, its kernels
    launched from C++. On one H200 fed compiled steps at batch 256 kept the GPU busy in 81-88% of
    samples with no input stall. None where the step is not host-bound: there, at batch 512, the fed
    step sat idle 12% for input, and its C++ wrapper was still compiling after 134 s."""
    if ((record or {}).get("diagnosis") or {}).get("verdict") != "host-bound":
        return []
    out = []
    larger = {c.case.batch_size: figure(c.record) for c in candidates
              if c.stage == "batch" and figure(c.record) and c.case.batch_size > fed.batch_size}
    if larger:
        out.append(dict(loader=fed.loader, batch_size=max(larger, key=larger.get)))
    if fed.device == "cuda" and fed.compile and fed.compile_wrapper == "python":
        out.append(dict(loader=fed.loader, compile_wrapper="cpp"))
    return out
