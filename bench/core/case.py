"""One benchmark case: every knob of a run, validated before anything starts (core/case_checks.py). A `Case`
is frozen and JSON-serialisable; its id and which knobs make two cases the same are core/identity.py's."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from . import identity
from .case_checks import (  # noqa: F401 (the accepted values, read from here too)
    ACCUMULATION_MODES, AUTO, COMPILE_MODES, COMPILE_SCOPES, COMPILE_WRAPPERS, DALI_CROPS, DALI_DEVICES,
    DALI_HANDOFFS, DEVICES, DP_DEVICE_SELECTIONS, FAULTS, INPUT_CHANNELS, LOADERS, OPTIMIZER_IMPLS,
    PRECISIONS, STEP_STREAMS, STRATEGIES, validate)
from .errors import CaseError


@dataclass(frozen=True)
class Case:
    # --- what is trained -------------------------------------------------------------------
    name: str = "custom"
    """Recipe name (e.g. `seed-baseline`); sweeps build cases from named recipes."""
    model: str = "resnet50"
    """A torchvision classification model by name, built with random weights (never downloaded); or the
    user's own, `package.module:factory`, called as factory(num_classes=N) (core/models.py)."""
    model_source: str = ""
    """For a factory: the first 12 hex digits of the sha256 of its module's source, so an edited model
    is another case; empty for a torchvision model."""
    model_path: str = ""
    """For a factory: the folder its package is imported from (where it lies on one machine, not in the
    case id); empty for a torchvision model."""
    num_classes: int = 1000
    """Width of the classifier head; labels are drawn from [0, num_classes)."""
    image_size: int = 224
    """Side of the square training crop, in pixels."""

    # --- where and how it is spread ----------------------------------------------------------
    device: str = "cuda"
    """`cuda`, or `cpu` (gloo for ddp; for the GPU-less smoke sweep and the tests)."""
    gpus: int = 1
    """Devices used: GPUs, or on device=cpu the number of gloo ranks (ddp only)."""
    strategy: str = "single"
    """`single` (one device), `dp` (nn.DataParallel, one process), `ddp` (one process per GPU)."""
    batch_size: int = 256
    """Per-GPU batch size in images; the global batch is batch_size x gpus."""

    # --- numerics --------------------------------------------------------------------------
    precision: str = "fp32"
    """`fp32` strict (TF32 off in cuBLAS and cuDNN), `tf32`, `bf16` or `fp16` autocast."""
    channels_last: bool = False
    """Model and inputs in NHWC memory format."""
    input_channels: int = 3
    """The channels each image reaches the model with: 3 (RGB), or 4 (RGB and a channel of zeros, the
    stem convolution widened to read it with zero weights there): the same training, but each pixel of the
    stem's NHWC input is 8 bytes in fp16, a shape convolution kernels handle better than 6 (MLPerf's
    ResNet-50 pads its input the same way). The loader delivers the fourth channel; refused with
    loader_only, where no model runs."""
    cudnn_benchmark: bool = True
    """Let cuDNN autotune convolution algorithms (done during warm-up)."""
    cudnn_benchmark_limit: int = 10
    """How many algorithms cuDNN's autotuning times for each convolution, those its heuristics rank first;
    0 = every one it has (a longer warm-up). 10 is PyTorch's default. Needs device='cuda' and cudnn_benchmark."""
    compile: str = ""
    """torch.compile mode; empty = eager. `reduce-overhead` replays the compiled graphs as CUDA graphs."""
    compile_scope: str = "model"
    """What `compile` compiles: `model` (the network alone) or `step` (forward and loss as one
    function, whose backward AOTAutograd compiles with it); needs `compile`."""
    compile_wrapper: str = "python"
    """The code Inductor writes around a compiled graph's kernels to launch them: `python`, or `cpp` (its C++
    wrapper: less host time per launch, for a step whose host queues it slower than the GPU runs it, at
    more compile time); needs `compile`."""
    inductor_options: str = ""
    """Inductor settings turned on for the compiled code, comma-separated, from: conv_1x1_as_mm,
    coordinate_descent_tuning, max_autotune_pointwise, aggressive_fusion (in that order; what each does:
    bench/core/kernel_options.py); the others are off. Needs `compile`."""
    optimizer_impl: str = "default"
    """SGD's implementation: `default` (PyTorch's choice: foreach on GPUs), `foreach` or `fused`
    (one kernel for every parameter's update)."""
    cuda_graph: bool = False
    """The whole optimizer step (forward, loss, backward, loss scaling and the update) captured once
    as one CUDA graph after the warm-up's first steps and replayed; each batch is copied into the
    graph's input. Needs a GPU, strategy='single', the `fused` optimizer (the others read the loss
    scaler's verdict on the host) and no `compile` mode of its own CUDA graphs."""

    step_stream: str = "default"
    """The CUDA stream the rank's work runs on: `default`, PyTorch's (CUDA's legacy default stream, which
    waits for work queued on the device's blocking streams before it and holds up their later work), or
    `own`, a stream made for the rank at start, so another library's GPU work (a loader's) neither waits
    for the queued steps through it nor holds them up; needs device='cuda'. On one H200 a compiled step
    fed by DALI ran 6,364.9 images/s on its own stream against 6,361.2 on the default one."""

    # --- input -----------------------------------------------------------------------------
    loader: str = "synthetic"
    """`synthetic` (tensors made once on the device), `torch` (DataLoader), `dali`."""
    data_dir: str = ""
    """ImageFolder tree of JPEGs for the torch and dali loaders."""
    num_workers: int = 0
    """torch DataLoader worker processes per rank; -1 = the machine's cores shared over its ranks."""
    pin_memory: bool = False
    """torch DataLoader: page-locked host batches."""
    non_blocking: bool = False
    """torch DataLoader: host-to-device copies with non_blocking=True."""
    persistent_workers: bool = False
    """torch DataLoader: keep workers alive between epochs (the suite streams epoch after epoch
    through one iterator, so inside a measured window this knob changes nothing)."""
    prefetch_factor: int = 2
    """torch DataLoader: batches prefetched per worker (needs num_workers > 0)."""
    loader_only: bool = False
    """Measure the input pipeline alone (no model): the images/s it can deliver."""
    cold_reads: bool = False
    """Empty the page cache of the data folder's files (posix_fadvise DONTNEED, no root needed) before each
    measured window, so the window's first reads of each file come from storage (DALI's reader then reads
    files rather than mapping them: pages a reader keeps mapped stay cached); needs a real loader."""
    host_side_only: bool = False
    """A torch DataLoader rank on the CPU standing in for a GPU rank (bench feed): its batches are handed over
    as the workers made them (uint8), since a GPU rank converts and normalizes them on its GPU; on one H100
    host that conversion alone took 315.7 ms a batch of 256 on one core. Needs loader='torch', loader_only
    and device='cpu'."""
    dali_device: str = "mixed"
    """DALI decode placement: `mixed` (GPU decode) or `cpu`."""
    hw_decoder_load: float = AUTO
    """DALI mixed decode: share of images sent to the hardware JPEG decoder, 0..1; -1 = chosen for the
    GPU when the case runs (0.99 where it has hardware JPEG engines, else DALI's 0.65), stored as a fact
    with the reason."""
    dali_threads: int = AUTO
    """DALI CPU threads per pipeline; -1 = the machine's cores shared over its ranks (DALI's own
    default of 4 halves the mixed decoder's ceiling on a 16-core H200 host)."""
    dali_prefetch_depth: int = 2
    """DALI: batches the pipeline prepares ahead of the one being trained on (its queue depth)."""
    dali_handoff: str = "host"
    """DALI on a GPU: how a batch reaches the step. `host`: the host waits until DALI's GPU work for the
    batch is done (DALI's PyTorch iterator); `stream`: the outputs are bound to the training stream, which
    waits for DALI on the GPU, so the host queues the step at once (on one H200 no gain: 6,118 vs 6,326)."""
    dali_crop: str = "decoder"
    """DALI: where the random crop is cut. `decoder`: only the crop's region of each JPEG is decoded; `resize`:
    whole images (what hardware JPEG engines take), then one operator cuts the random window and resizes it."""
    dali_cpu_share: float = 0.0
    """DALI: the share of each batch decoded on the CPU by a second pipeline (its own part of the files and
    of the threads), joined on the device to the part the first pipeline decodes as `dali_device` says;
    0 = one pipeline. On one H200 a step that fills the GPU waited for DALI's GPU work, not for its CPU work."""

    cuda_max_connections: int = 0
    """CUDA_DEVICE_MAX_CONNECTIONS for the case's processes: how many hardware work queues the GPU spreads
    its streams over (1-32); 0 = as the environment has it (the driver's 8 when unset). Streams that share a
    queue run in its order: a loader's kernels queued behind a captured step wait for all of it."""

    # --- DataParallel (the second article's knobs) -------------------------------------------
    dp_device_selection: str = "default"
    """`default` (GPUs 0..N-1) or `free_memory` (the N GPUs with most free memory)."""
    dp_output_device: int = -1
    """Index into the chosen GPUs that gathers outputs; -1 = library default (the first)."""
    dp_loss_in_forward: bool = False
    """Compute the loss inside forward so only per-replica scalars are gathered."""

    # --- DistributedDataParallel ---------------------------------------------------------------
    bucket_cap_mb: float = 25.0
    """DDP gradient bucket size in MiB."""
    gradient_as_bucket_view: bool = False
    """DDP: gradients alias the all-reduce buckets."""
    static_graph: bool = False
    """DDP: the graph is the same every step."""
    broadcast_buffers: bool = True
    """DDP: broadcast BatchNorm buffers from rank 0 every forward."""
    accumulation_steps: int = 1
    """Micro-batches per optimizer step; each micro-batch has batch_size images per GPU."""
    accumulation_mode: str = "article"
    """`article` (backward every micro-batch, all-reduce each time) or `no_sync`."""
    nccl_env: tuple = ()
    """Extra NCCL_* variables for this case, as (name, value) pairs."""

    # --- measurement -------------------------------------------------------------------------
    warmup_steps: int = 10
    """Optimizer steps run before measuring (cuDNN autotune, allocator, NCCL, prefetch)."""
    steps: int = 30
    """Fewest optimizer steps in one measured window."""
    min_window_s: float = 0.0
    """Shortest measured window in seconds: the steps per window grow (from the warm-up's step time,
    the same on every rank) until a window lasts at least this long; 0 = exactly `steps` (the GPU
    sweeps set 2 s, 2.5 s where a real loader feeds the model)."""
    repeats: int = 3
    """Measured windows, run back to back as one span: a process's figure is the span's images over its
    time; the windows' spread is its within-process noise."""
    timeout_s: float = 900.0
    """Wall-clock limit for the whole case, start-up included."""
    seed: int = 0
    """Seed for weights and synthetic data."""

    overhead_check: bool = False
    """Also time the same steps in a minimal loop, to show what the harness costs."""
    profile_steps: int = 0
    """Optimizer steps run after the measured windows under torch's profiler (0 = none), summarised in the
    record (`profile`) per CUDA stream, then per host thread: busy time per step and what took it, DALI's
    streams beside the step's. The measured figure never carries the profiler's cost."""

    fault: str = ""
    """Test only: inject `oom`, `crash` or `hang` (the others then wait in a collective) on `fault_rank`."""
    fault_rank: int = 0
    """Test only: the rank that fails."""

    def __post_init__(self):
        # normalise list-like inputs from JSON so the dataclass stays hashable
        object.__setattr__(self, "nccl_env", tuple(tuple(p) for p in self.nccl_env))
        validate(self)

    # --- derived -----------------------------------------------------------------------------
    @property
    def global_batch(self) -> int:
        """Images per micro-batch across all GPUs."""
        return self.batch_size * self.gpus

    @property
    def images_per_step(self) -> int:
        """Images per optimizer step across all GPUs (accumulation included)."""
        return self.global_batch * self.accumulation_steps

    @property
    def launcher(self) -> str:
        return "torchrun" if self.strategy == "ddp" else "process"

    @property
    def process_batch(self) -> int:
        """Images one process feeds per micro-batch: DataParallel's one process feeds all its GPUs."""
        return self.batch_size * self.gpus if self.strategy == "dp" else self.batch_size

    @property
    def case_id(self) -> str:
        return identity.case_id(self)

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.compare}
        d["nccl_env"] = [list(p) for p in self.nccl_env]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        known = {f.name for f in fields(cls) if f.compare}
        unknown = sorted(set(d) - known)
        if unknown:
            raise CaseError(f"unknown case field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}")
        return cls(**d)

    def replace(self, **changes) -> "Case":
        return dataclasses.replace(self, **changes)
