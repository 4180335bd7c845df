"""Named recipes: functions that return one case each, derived from a base, so a case's `name`
says which recipe made it and re-running it reproduces it."""
from __future__ import annotations

from .case import AUTO, Case

# ResNet-50 training as the articles measure it: 224 px crops, 256 images per GPU. Windows are
# bounded by time (at least 2 s each, three of them), not by a fixed step count, so a step's
# jitter never decides a figure however fast the configuration is
GPU_BASE = Case(device="cuda", batch_size=256, image_size=224, warmup_steps=5, steps=5, min_window_s=2.0,
                repeats=3, timeout_s=600.0)
# The GPU-less path: the same code on tiny images, gloo for DDP, so a newcomer sees it all work
CPU_BASE = Case(device="cpu", batch_size=8, image_size=64, warmup_steps=2, steps=4, repeats=2,
                timeout_s=300.0)

# `bench recommend` on a machine with no GPU: the search itself, on a model small enough to walk in minutes
CPU_RECOMMEND_BASE = CPU_BASE.replace(model="resnet18", num_classes=10, image_size=32, min_window_s=0.3)

ARTICLE_ACCUMULATION = 8  # the first article accumulates over 8 micro-batches
# A real loader's pace wanders over seconds (on one H200 the host's JPEG decoding moved 2,366-2,565
# images/s within 5 minutes; six 2.5 s windows of DALI mixed spread 3,808-4,292), so a loader case
# samples it in more windows than a synthetic one: ten back-to-back windows of at least 2.5 s (each
# a whole number of the torch DataLoader's rounds), whose window-to-window error has 9 degrees of
# freedom; six gave a 95% interval of +-5.4% there.
LOADER_WINDOW_S = 2.5
LOADER_WINDOWS = 10


def gpu_counts(max_gpus: int) -> list[int]:
    """1, 2, 4, ... up to max_gpus, with max_gpus itself included."""
    counts, n = [], 1
    while n < max_gpus:
        counts.append(n)
        n *= 2
    return counts + [max_gpus]


def _loader_knobs(base: Case, workers: int, pin: bool) -> dict:
    # data-loader knobs are set only where a DataLoader runs, so a label never claims them idly
    if base.loader != "torch":
        return {}
    pin = pin and base.device == "cuda"  # page-locked copies mean nothing without a GPU
    return {"num_workers": workers, "pin_memory": pin, "non_blocking": pin,
            "persistent_workers": workers != 0}


# --- recipes -----------------------------------------------------------------------------------
def single(base: Case, **kw) -> Case:
    return base.replace(name="single", strategy="single", gpus=1, **kw)


def _dp_window(base: Case, gpus: int) -> dict:
    # DataParallel over several GPUs can take seconds per step (see DP_CUDNN_BENCHMARK); fewer,
    # longer steps keep its window as long as the others' without hour-long sweeps
    if gpus == 1 or base.device != "cuda":
        return {}
    return {"warmup_steps": min(base.warmup_steps, 3), "steps": max(5, base.steps // 2)}


# cuDNN's autotuning cache is per thread (cuDNN v8 API), and nn.DataParallel runs each replica in a
# new thread every step, so with benchmark on every step may re-tune every convolution. With it on,
# fp16 DataParallel over 2 H200s took 1.5 s per step against 86 ms on one. DataParallel cases keep
# PyTorch's default (off); the cudnn_benchmark knob still lets a sweep turn it on.
DP_CUDNN_BENCHMARK = False


def _dp_windowed(case: Case) -> Case:
    """The case with DataParallel's window where it runs DataParallel."""
    return case.replace(**_dp_window(case, case.gpus)) if case.strategy == "dp" else case


def seed_baseline(base: Case, gpus: int) -> Case:
    """The second article's baseline: nn.DataParallel over N GPUs, library defaults, fp32."""
    return base.replace(name="seed-baseline", strategy="dp", gpus=gpus, precision="fp32",
                        channels_last=False, cudnn_benchmark=DP_CUDNN_BENCHMARK,
                        **_loader_knobs(base, 0, False), **_dp_window(base, gpus))


def seed_optimized(base: Case, gpus: int) -> Case:
    """The second article's three DataParallel configurations plus its section 4 (AMP, loader)."""
    amp = "fp16" if base.device == "cuda" else "bf16"  # the article's AMP is fp16; the CPU has bf16
    return base.replace(name="seed-optimized", strategy="dp", gpus=gpus, precision=amp,
                        dp_device_selection="free_memory" if base.device == "cuda" else "default",
                        dp_output_device=gpus - 1 if gpus > 1 else -1, dp_loss_in_forward=True,
                        cudnn_benchmark=DP_CUDNN_BENCHMARK, **_loader_knobs(base, 8, True), **_dp_window(base, gpus))


# DDP without the per-step host work a ResNet does not need: no buffer broadcast before every forward
# (each rank keeps its own BatchNorm running statistics, which training does not read), gradients that
# are the all-reduce buckets (no copy in and out), and a graph declared static (no search for unused
# parameters). On one H200 at one rank, fp16 + NHWC eager, alternating in one process: DDP's defaults
# 5,051-5,358 images/s against single 5,661-5,698; buffers not broadcast 5,548; all three 5,693.
DDP_TUNED = {"broadcast_buffers": False, "gradient_as_bucket_view": True, "static_graph": True}


def best(base: Case, gpus: int) -> Case:
    """The best configuration the suite knows: tuned DDP (single on one GPU), fp16 autocast, NHWC."""
    amp = "fp16" if base.device == "cuda" else "bf16"
    tuned = DDP_TUNED if gpus > 1 else {}
    return base.replace(name="best", strategy="ddp" if gpus > 1 else "single", gpus=gpus,
                        precision=amp, channels_last=True, **tuned, **_loader_knobs(base, 8, True))


COMPILED_BEST = {"compile": "default", "compile_scope": "step", "optimizer_impl": "fused"}
COMPILED_BEST_BATCH = {"resnet50": 512}
"""The fastest set-up the suite knows where a machine has no `bench recommend` winner of its own: what
recommend found for ResNet-50 on one H200 (results/1x-nvidia-h200/recipes/recipe_1gpu.py), the step
(forward, loss and backward) compiled with fused SGD, fp16 and NHWC at batch 512: about 7.2k images/s
there, 6.26k on one H100, against 5.9k and 4.8k eager. Another model keeps the sweep's batch."""
RECOMMENDED = "best-recommended"
"""The name a machine's own recommend winner runs under in the default sweep (cli/sweep.py)."""


def best_compiled(base: Case, gpus: int) -> Case:
    """`best` with the step compiled and fused SGD: the fastest recipe the suite knows (COMPILED_BEST)."""
    batch = COMPILED_BEST_BATCH.get(base.model, base.batch_size)
    return best(base, gpus).replace(name="best-compiled", batch_size=batch, **COMPILED_BEST)


def ddp(base: Case, gpus: int, precision: str, channels_last: bool, **kw) -> Case:
    return base.replace(name="ddp", strategy="ddp", gpus=gpus, precision=precision,
                        channels_last=channels_last, **kw)


def accumulation(base: Case, gpus: int, mode: str) -> Case:
    """The first article's accumulation loop (`article`), and the same with no_sync()."""
    return base.replace(name=f"ddp-accumulate-{mode}", strategy="ddp", gpus=gpus, precision="bf16",
                        channels_last=True, accumulation_steps=ARTICLE_ACCUMULATION, accumulation_mode=mode,
                        warmup_steps=2, steps=max(base.steps // ARTICLE_ACCUMULATION, 3))


def loader_windows(base: Case) -> dict:
    """The window settings of a case a real loader feeds (the CPU path keeps its short ones)."""
    if base.device != "cuda":
        return {}
    return {"min_window_s": max(base.min_window_s, LOADER_WINDOW_S), "repeats": max(base.repeats, LOADER_WINDOWS)}


def loader_case(base: Case, gpus: int, loader: str, dali_device: str = "mixed", loader_only: bool = False) -> Case:
    """DDP, bf16, NHWC, fed by one loader whose workers or threads are the machine's cores shared
    over the ranks (resolved when it runs, stored as a fact). A loader-only case runs no model, so
    it has no precision; channels_last still sets the layout the loader delivers."""
    kw = {}
    window = loader_windows(base)
    if loader == "torch":
        kw = dict(_loader_knobs(base.replace(loader="torch"), AUTO, True), **window)
    if loader == "dali":
        kw = {"dali_device": dali_device, "dali_threads": AUTO, **window}
    name = f"loader-{loader}" + (f"-{dali_device}" if loader == "dali" else "") + ("-only" if loader_only else "")
    return base.replace(name=name, strategy="ddp", gpus=gpus, precision="fp32" if loader_only else "bf16",
                        channels_last=True, loader=loader, loader_only=loader_only, **kw)


def noise_reference(device: str, base: Case | None = None) -> Case:
    """The case whose spread over fresh processes is a run's noise floor: the fastest plain
    single-device set-up (fp16 + channels_last on a GPU, fp32 on the CPU), synthetic input."""
    if device == "cuda":
        return single(base or GPU_BASE, precision="fp16", channels_last=True).replace(name="noise-floor")
    # on the CPU the floor measures the machine, not ResNet-50: a small model keeps it cheap
    small = (base or CPU_BASE).replace(model="resnet18", num_classes=10, image_size=32, min_window_s=0.5)
    return single(small, precision="fp32").replace(name="noise-floor")
