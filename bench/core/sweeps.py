"""Named sweeps: lists of cases built from the recipes (core/recipes.py); `build` validates a
whole sweep before anything runs."""
from __future__ import annotations

from . import models
from .case import AUTO, Case
from .errors import CaseError
from .recipes import (ARTICLE_ACCUMULATION, CPU_BASE, CPU_RECOMMEND_BASE, DDP_TUNED, DP_CUDNN_BENCHMARK,  # noqa: F401
                      GPU_BASE, _dp_window, _dp_windowed, accumulation, best, best_compiled, ddp, gpu_counts,
                      loader_case, loader_windows, noise_reference, seed_baseline, seed_optimized, single)

# --- sweeps ------------------------------------------------------------------------------------
def seed_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    return [c for n in gpu_counts(max_gpus) for c in (seed_baseline(base, n), seed_optimized(base, n))]


def best_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """The baseline, the best eager set-up and, on a GPU, the fastest the suite knows (compiled; a machine's
    own recommend winner takes its place where one is stored, cli/sweep.py), at each GPU count."""
    compiled = (lambda n: [best_compiled(base, n)]) if base.device == "cuda" else (lambda n: [])
    return [c for n in gpu_counts(max_gpus) for c in (seed_baseline(base, n), best(base, n), *compiled(n))]


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
    if data:  # the workers claim's pair: the same loader with no worker process
        data.insert(0, data[0].replace(name="loader-torch-no-workers", num_workers=0, persistent_workers=False))
    return data + [
        seed_baseline(base, 1), seed_optimized(base, 1),
        # the amp claim's pair: one precision against the other, nothing else changed
        single(base, precision="fp32"), single(base, precision="bf16"),
        single(base, precision="bf16", channels_last=True),
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
    return max((c.steps * c.process_batch * c.accumulation_steps * (c.gpus if c.strategy == "ddp" else 1)
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
BETWEEN_GPUS_STEPS = ("dp-free-memory-gpus", "dp-output-device", "dp-loss-in-forward", "nccl-article-settings")
"""Steps whose knob acts only between GPUs (which GPUs DataParallel picks, where it gathers, what it
gathers, how NCCL talks): on one GPU they measure nothing their claim could use (each claim needs 2+
GPUs), so the one-GPU ablation carries their knobs on without running them (on one H200 their processes
took 94.6 s of a `make bench` that ran past 9 minutes)."""


def ablation_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """Cumulative changes from the baseline, then from the best each change removed alone."""
    base = base.replace(strategy="dp", gpus=max_gpus, steps=3, repeats=2)
    cases, knobs, best_knobs = [], {}, None
    for i, (step, change) in enumerate(ablation_steps(base, max_gpus)):
        if max_gpus == 1 and step in BETWEEN_GPUS_STEPS:
            continue  # neither run nor carried on: ablation-07 then differs from 03 in precision alone
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


CLAIM_STEPS_ONE_GPU = ("baseline", "num-workers", "pin-memory", "non-blocking", "amp-fp16", "cudnn-benchmark",
                       "dali-mixed")
"""The ablation steps whose neighbours test a claim on one GPU: workers, pin-memory and non-blocking
along the walk, amp (03 -> 07, precision alone there), dali (10 -> 11)."""


NO_CLAIM_STEPS = ("channels-last", "accumulate-no-sync")
"""Steps no claim compares with a neighbour (the accumulation claims use the strategies' pairs)."""


def claims_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """Only the cases the articles' claims need at this GPU count, each claim a pair differing in its
    own knobs alone (analysis/experiments.py finds the pairs): on one GPU the ablation steps above, on
    more the whole walk (its between-GPU steps are claims there) and the accumulation pairs. `bench
    sweep` measures them as experiments, processes interleaved until each verdict is decided; the
    ablation sweep keeps the whole walk and its removals."""
    walk = [c for c in ablation_sweep(max_gpus, base) if not c.name.startswith("ablation-best-")]
    if max_gpus == 1:
        return [c for c in walk if c.name.split("-", 2)[2] in CLAIM_STEPS_ONE_GPU]
    walk = [c for c in walk if c.name.split("-", 2)[2] not in NO_CLAIM_STEPS]
    top = max(gpu_counts(max_gpus))
    return walk + [ddp(base, top, "bf16", True), accumulation(base, top, "article"), accumulation(base, top, "no_sync")]


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


def ddp_cost_sweep(max_gpus: int, base: Case = GPU_BASE) -> list[Case]:
    """What DDP itself costs a rank: tuned DDP on one GPU beside single, in each mixed precision with
    NHWC (run it with --processes 3: the two figures are a few percent apart). The targets table
    divides one by the other."""
    precisions = ("fp16", "bf16") if base.device == "cuda" else ("bf16",)
    return [c for p in precisions for c in (
        single(base, precision=p, channels_last=True).replace(name="target-ddp-cost-single"),
        ddp(base, 1, p, True, **DDP_TUNED).replace(name="target-ddp-cost-tuned"))]


def tiny_sweep(max_gpus: int = 2, base: Case = CPU_BASE) -> list[Case]:
    """The pytest plugin's own check: two CPU cases and one that needs two GPUs."""
    t = base.replace(model="resnet18", num_classes=10, batch_size=4, image_size=32, warmup_steps=2, steps=2,
                     min_window_s=0.3, repeats=3, data_dir="")
    return [single(t), ddp(t, 2, "fp32", False), GPU_BASE.replace(name="ddp", strategy="ddp", gpus=2)]


SWEEPS = {
    "seed": seed_sweep,
    "best": best_sweep,
    "strategies": strategies_sweep,
    "smoke": smoke_sweep,
    "loaders": loaders_sweep,
    "scaling": scaling_sweep,
    "amp": amp_sweep,
    "ablation": ablation_sweep,
    "claims": claims_sweep,
    "tiny": tiny_sweep,
    "targets": targets_sweep,
    "ddp-cost": ddp_cost_sweep,
}
NEEDS_DATA = {"loaders", "smoke", "ablation", "claims", "targets"}
DEFAULT_GPU_SWEEPS = ("seed", "best", "claims")
AT_LARGEST_COUNT = {"ablation", "claims"}  # every case of these runs on the largest GPU count asked for
ALL_GPU_SWEEPS = ("seed", "best", "claims", "ablation", "strategies", "scaling", "amp", "loaders", "targets", "ddp-cost")


def build(name: str, max_gpus: int, device: str = "cuda", **overrides) -> list[Case]:
    if name not in SWEEPS:
        raise CaseError(f"unknown sweep {name!r}; accepted: {', '.join(SWEEPS)}")
    model = {k: overrides.pop(k) for k in ("model", "model_source", "model_path") if k in overrides}
    base = GPU_BASE if device == "cuda" else CPU_BASE
    if overrides:
        base = base.replace(**overrides)
    if name in ("smoke", "tiny"):
        cases = SWEEPS[name](max_gpus, base if device == "cpu" else CPU_BASE.replace(**overrides))
    else:
        cases = SWEEPS[name](max_gpus, base)
    return [without_idle_data(with_model(c, **model) if model else c) for c in cases]


def with_model(case: Case, model: str, model_source: str = "", model_path: str = "") -> Case:
    """The case training `model` instead of its recipe's; a 4-channel input, which widens a ResNet stem,
    reads RGB alone where the model has no such stem."""
    channels = case.input_channels if models.STEM_MODELS.match(model) else 3
    return case.replace(model=model, model_source=model_source, model_path=model_path, input_channels=channels)


def without_idle_data(case: Case) -> Case:
    """A data folder given to a run reaches only the cases that read it: on a synthetic case it would
    change nothing but the case id (an `amp` case run beside `loaders` must keep its id)."""
    return case.replace(data_dir="") if case.loader == "synthetic" and case.data_dir else case
