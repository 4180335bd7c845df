"""Named sweeps: functions that return cases. Every case comes from a named recipe, so its
`name` field says which recipe made it and re-running the sweep reproduces it."""
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


def best(base: Case, gpus: int) -> Case:
    """The best configuration the suite knows: DDP (single on one GPU), fp16 autocast, NHWC."""
    amp = "fp16" if base.device == "cuda" else "bf16"
    return base.replace(name="best", strategy="ddp" if gpus > 1 else "single", gpus=gpus,
                        precision=amp, channels_last=True, **_loader_knobs(base, 8, True))


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


# --- sweeps ------------------------------------------------------------------------------------
def seed_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    return [c for n in gpu_counts(max_gpus) for c in (seed_baseline(base, n), seed_optimized(base, n))]


def best_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    return [c for n in gpu_counts(max_gpus) for c in (seed_baseline(base, n), best(base, n))]


def strategies_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """single, dp baseline, dp seed-optimized and ddp (fp32; bf16 + NHWC) at each GPU count,
    and the accumulation pair at the largest count."""
    cases = [single(base, precision="fp32"), single(base, precision="bf16", channels_last=True)]
    for n in gpu_counts(max_gpus):
        cases += [seed_baseline(base, n), seed_optimized(base, n),
                  ddp(base, n, "fp32", False), ddp(base, n, "bf16", True)]
    top = max(gpu_counts(max_gpus))
    cases += [accumulation(base, top, "article"), accumulation(base, top, "no_sync")]
    return cases


def smoke_sweep(max_gpus: int = 2, base: Case = CPU_BASE) -> list[Case]:
    """What `make bench` runs on a machine with no GPU: every strategy and loader, tiny and quick."""
    ranks = max(2, max_gpus)
    data = [] if not base.data_dir else [
        base.replace(name="loader-torch", strategy="ddp", gpus=ranks, loader="torch", num_workers=1),
        base.replace(name="loader-dali-cpu", strategy="ddp", gpus=ranks, loader="dali", dali_device="cpu"),
    ]
    return data + [
        seed_baseline(base, 1), seed_optimized(base, 1),
        single(base, precision="fp32"), single(base, precision="bf16", channels_last=True),
        ddp(base, 1, "fp32", False), ddp(base, ranks, "fp32", False),
        accumulation(base.replace(steps=2), ranks, "article"), accumulation(base.replace(steps=2), ranks, "no_sync"),
    ]


def loaders_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """Each loader end to end beside its loader-only ceiling, at 1 GPU and at max_gpus."""
    cases = []
    for n in sorted({1, max_gpus}):
        cases.append(loader_case(base, n, "synthetic"))
        for loader, dev in (("torch", ""), ("dali", "mixed"), ("dali", "cpu")):
            cases.append(loader_case(base, n, loader, dev or "mixed"))
            cases.append(loader_case(base, n, loader, dev or "mixed", loader_only=True))
    return cases


def images_needed(cases: list[Case]) -> int:
    """JPEGs a data folder needs so that no case's measured window re-reads a prefetched few."""
    from .loaders import process_batch
    return max((c.steps * process_batch(c) * c.accumulation_steps * (c.gpus if c.strategy == "ddp" else 1)
                for c in cases if c.loader != "synthetic"), default=0)


def scaling_sweep(max_gpus: int, base: Case = GPU_BASE, batches=(64, 128, 256, 512)) -> list[Case]:
    """GPU counts x per-GPU batch sizes for dp and ddp (bf16, NHWC); the report divides each by
    N x the one-GPU figure at the same per-GPU batch."""
    cases = []
    for bs in batches:
        for n in gpu_counts(max_gpus):
            b = base.replace(batch_size=bs)
            cases.append(ddp(b, n, "bf16", True).replace(name="scaling-ddp"))
            cases.append(b.replace(name="scaling-dp", strategy="dp", gpus=n, precision="bf16", channels_last=True,
                                   cudnn_benchmark=DP_CUDNN_BENCHMARK, **_dp_window(b, n)))
    return cases


def amp_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """Every precision with and without channels_last, on one GPU (precision does not depend on N)."""
    precisions = ("fp32", "tf32", "bf16", "fp16") if base.device == "cuda" else ("fp32", "bf16")
    return [single(base, precision=p, channels_last=cl).replace(name=f"amp-{p}")
            for p in precisions for cl in (False, True)]


def ablation_steps(base: Case, gpus: int) -> list[tuple[str, dict]]:
    """From the articles' baseline to the best, one change at a time; each entry adds to the last.
    Every knob the two articles name appears once."""
    workers = AUTO  # the first article: about the core count (resolved per machine when it runs)
    return [
        ("baseline", dict(strategy="dp", precision="fp32", loader="torch", num_workers=0,
                          cudnn_benchmark=DP_CUDNN_BENCHMARK)),
        ("num-workers", dict(num_workers=workers, persistent_workers=True)),
        ("pin-memory", dict(pin_memory=True)),
        ("non-blocking", dict(non_blocking=True)),
        ("dp-free-memory-gpus", dict(dp_device_selection="free_memory")),
        ("dp-output-device", dict(dp_output_device=gpus - 1 if gpus > 1 else -1)),
        ("dp-loss-in-forward", dict(dp_loss_in_forward=True)),
        ("amp-fp16", dict(precision="fp16")),
        ("ddp", dict(strategy="ddp", dp_device_selection="default", dp_output_device=-1, dp_loss_in_forward=False)),
        ("channels-last", dict(channels_last=True)),
        ("cudnn-benchmark", dict(cudnn_benchmark=True)),
        ("dali-mixed", dict(loader="dali", dali_device="mixed", num_workers=0, persistent_workers=False,
                            pin_memory=False, non_blocking=False)),
        ("nccl-article-settings", dict(nccl_env=(("NCCL_DEBUG", "WARN"), ("NCCL_IB_DISABLE", "1")))),
        ("accumulate-no-sync", dict(accumulation_steps=ARTICLE_ACCUMULATION, accumulation_mode="no_sync",
                                    steps=max(base.steps // ARTICLE_ACCUMULATION, 2), warmup_steps=2)),
    ]


ABLATION_BEST_STEP = "dali-mixed"  # the best configuration: every change up to and including this one


def ablation_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """Cumulative changes from the baseline, then from the best each change removed alone."""
    base = base.replace(strategy="dp", gpus=max_gpus, steps=3, repeats=2)
    cases, knobs, best_knobs = [], {}, None
    for i, (step, change) in enumerate(ablation_steps(base, max_gpus)):
        knobs.update(change)
        cases.append(_dp_windowed(base.replace(name=f"ablation-{i:02d}-{step}", **knobs)))
        if step == ABLATION_BEST_STEP:
            best_knobs = dict(knobs)
    removals = {
        "without-ddp": dict(strategy="dp", cudnn_benchmark=DP_CUDNN_BENCHMARK),
        "without-amp": dict(precision="fp32"),
        "without-channels-last": dict(channels_last=False),
        "without-dali": dict(loader="torch", num_workers=AUTO, pin_memory=True, non_blocking=True,
                             persistent_workers=True),
    }
    for label, change in removals.items():
        cases.append(_dp_windowed(base.replace(name=f"ablation-best-{label}", **{**best_knobs, **change})))
    return cases


def targets_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """What the performance targets are read from: the best single-GPU set-up eager and compiled
    (with the harness-overhead check), DDP at every GPU count, and each loader end to end."""
    fast = dict(precision="fp16", channels_last=True)
    cases = [single(base, overhead_check=True, **fast).replace(name="target-single-eager"),
             single(base, compile="default", **fast).replace(name="target-single-compiled")]
    for n in gpu_counts(max_gpus):
        cases.append(ddp(base, n, **fast).replace(name="target-ddp"))
        cases.append(ddp(base, n, compile="default", **fast).replace(name="target-ddp-compiled"))
        for dev in ("mixed", "cpu"):
            cases.append(loader_case(base, n, "dali", dev).replace(name=f"target-dali-{dev}", **fast))
        cases.append(loader_case(base, n, "torch").replace(name="target-torch", **fast))
    return cases


def tiny_sweep(max_gpus: int = 2, base: Case = CPU_BASE) -> list[Case]:
    """The pytest plugin's own check: two CPU cases and one that needs two GPUs."""
    t = base.replace(model="resnet18", num_classes=10, batch_size=4, image_size=32, warmup_steps=2, steps=2,
                     min_window_s=0.3, repeats=3, data_dir="")
    return [single(t), ddp(t, 2, "fp32", False), GPU_BASE.replace(name="ddp", strategy="ddp", gpus=2)]


def noise_reference(device: str, base: Case | None = None) -> Case:
    """The case whose spread over fresh processes is a run's noise floor: the fastest plain
    single-device set-up (fp16 + channels_last on a GPU, fp32 on the CPU), synthetic input."""
    if device == "cuda":
        return single(base or GPU_BASE, precision="fp16", channels_last=True).replace(name="noise-floor")
    # on the CPU the floor measures the machine, not ResNet-50: a small model keeps it cheap
    small = (base or CPU_BASE).replace(model="resnet18", num_classes=10, image_size=32, min_window_s=0.5)
    return single(small, precision="fp32").replace(name="noise-floor")


SWEEPS = {
    "seed": seed_sweep,
    "best": best_sweep,
    "strategies": strategies_sweep,
    "smoke": smoke_sweep,
    "loaders": loaders_sweep,
    "scaling": scaling_sweep,
    "amp": amp_sweep,
    "ablation": ablation_sweep,
    "tiny": tiny_sweep,
    "targets": targets_sweep,
}
NEEDS_DATA = {"loaders", "smoke", "ablation", "targets"}
DEFAULT_GPU_SWEEPS = ("seed", "best", "ablation")
AT_LARGEST_COUNT = {"ablation"}  # every case of these runs on the largest GPU count asked for
ALL_GPU_SWEEPS = ("seed", "best", "ablation", "strategies", "scaling", "amp", "loaders", "targets")


def build(name: str, max_gpus: int, device: str = "cuda", **overrides) -> list[Case]:
    if name not in SWEEPS:
        raise ValueError(f"unknown sweep {name!r}; accepted: {', '.join(SWEEPS)}")
    base = GPU_BASE if device == "cuda" else CPU_BASE
    if overrides:
        base = base.replace(**overrides)
    if name in ("smoke", "tiny"):
        cases = SWEEPS[name](max_gpus, base if device == "cpu" else CPU_BASE.replace(**overrides))
    else:
        cases = SWEEPS[name](max_gpus, base)
    return [without_idle_data(c) for c in cases]


def without_idle_data(case: Case) -> Case:
    """A data folder given to a run reaches only the cases that read it: on a synthetic case it would
    change nothing but the case id (an `amp` case run beside `loaders` must keep its id)."""
    return case.replace(data_dir="") if case.loader == "synthetic" and case.data_dir else case
