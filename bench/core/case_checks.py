"""Which values each Case field accepts, and the check of a whole case before anything starts: one
line naming the first field that is wrong and what it accepts, including a knob set where it acts not."""
from __future__ import annotations

import functools
import re
from dataclasses import fields

from . import identity, models
from .cuda_graph_rules import check_cuda_graph
from .errors import CaseError
from .kernel_options import check_inductor_options

STRATEGIES = ("single", "dp", "ddp")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
LOADERS = ("synthetic", "torch", "dali")
DEVICES = ("cuda", "cpu")
DALI_DEVICES = ("mixed", "cpu")
DALI_HANDOFFS = ("host", "stream")
DALI_CROPS = ("decoder", "resize")
ACCUMULATION_MODES = ("article", "no_sync")
DP_DEVICE_SELECTIONS = ("default", "free_memory")
FAULTS = ("", "oom", "crash", "hang")
AUTO = -1
"""`num_workers` / `dali_threads` value meaning: this machine's cores shared over its ranks, resolved
when the case runs and stored as a fact, so a case id does not change with the machine."""
COMPILE_MODES = ("", "default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
COMPILE_SCOPES = ("model", "step")
COMPILE_WRAPPERS = ("python", "cpp")
OPTIMIZER_IMPLS = ("default", "foreach", "fused")
STEP_STREAMS = ("default", "own")
INPUT_CHANNELS = (3, 4)
MAX_CUDA_CONNECTIONS = 32
CUDA_CONNECTIONS_VAR = "CUDA_DEVICE_MAX_CONNECTIONS"
"""The variable `cuda_max_connections` sets; the driver reads it when a process makes its CUDA context."""


def _one_of(name, value, accepted):
    if value not in accepted:
        shown = ", ".join(repr(a) if a == "" else a for a in accepted)
        raise CaseError(f"{name}={value!r} is not accepted; use one of: {shown}")


def _at_least(name, value, low, kind=int):
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise CaseError(f"{name}={value!r} must be {'a number' if kind is float else 'a whole number'} >= {low}")
    if value < low:
        raise CaseError(f"{name}={value!r} must be >= {low}")


def validate(c) -> None:
    """Raise CaseError naming the first field that is wrong and what it accepts."""
    models.check_name(c.model)
    if models.is_factory(c.model) and not re.fullmatch(r"[0-9a-f]{12}", c.model_source):
        raise CaseError(f"model={c.model!r} needs model_source, the 12-digit hash of its module's source "
                        "(the command line sets it: run from the folder that holds the package)")
    if models.is_timm(c.model) and not c.model_source:
        raise CaseError(f"model={c.model!r} needs model_source, the timm version it is built with (the command line "
                        "sets it)")
    _one_of("strategy", c.strategy, STRATEGIES)
    _one_of("precision", c.precision, PRECISIONS)
    _one_of("loader", c.loader, LOADERS)
    _one_of("device", c.device, DEVICES)
    _one_of("dali_device", c.dali_device, DALI_DEVICES)
    _one_of("dali_handoff", c.dali_handoff, DALI_HANDOFFS)
    _one_of("dali_crop", c.dali_crop, DALI_CROPS)
    _one_of("accumulation_mode", c.accumulation_mode, ACCUMULATION_MODES)
    _one_of("dp_device_selection", c.dp_device_selection, DP_DEVICE_SELECTIONS)
    _one_of("fault", c.fault, FAULTS)
    _one_of("compile", c.compile, COMPILE_MODES)
    _one_of("compile_scope", c.compile_scope, COMPILE_SCOPES)
    _one_of("compile_wrapper", c.compile_wrapper, COMPILE_WRAPPERS)
    _one_of("optimizer_impl", c.optimizer_impl, OPTIMIZER_IMPLS)
    _one_of("step_stream", c.step_stream, STEP_STREAMS)
    for name in ("channels_last", "cudnn_benchmark", "loader_only", "overhead_check", "pin_memory", "non_blocking",
                 "persistent_workers", "cold_reads", "host_side_only", "dp_loss_in_forward", "gradient_as_bucket_view",
                 "static_graph", "broadcast_buffers", "cuda_graph"):
        if not isinstance(getattr(c, name), bool):
            raise CaseError(f"{name}={getattr(c, name)!r} must be true or false")
    _at_least("gpus", c.gpus, 1)
    _at_least("batch_size", c.batch_size, 1)
    _at_least("num_classes", c.num_classes, 2)
    _at_least("image_size", c.image_size, 32)
    _at_least("warmup_steps", c.warmup_steps, 0)
    _at_least("steps", c.steps, 1)
    _at_least("repeats", c.repeats, 1)
    _at_least("num_workers", c.num_workers, AUTO)
    _at_least("prefetch_factor", c.prefetch_factor, 1)
    _at_least("accumulation_steps", c.accumulation_steps, 1)
    _at_least("profile_steps", c.profile_steps, 0)
    if c.dali_threads == 0:
        raise CaseError("dali_threads=0 must be -1 (cores per rank) or >= 1")
    _at_least("dali_threads", c.dali_threads, AUTO)
    _at_least("min_window_s", c.min_window_s, 0.0, float)
    _at_least("fault_rank", c.fault_rank, 0)
    _at_least("timeout_s", c.timeout_s, 1, float)
    _at_least("bucket_cap_mb", c.bucket_cap_mb, 0.0, float)
    if c.hw_decoder_load != AUTO:
        _at_least("hw_decoder_load", c.hw_decoder_load, 0.0, float)
    if c.hw_decoder_load > 1:
        raise CaseError(f"hw_decoder_load={c.hw_decoder_load!r} must be -1 (chosen for the GPU) or between 0 and 1")
    _at_least("dali_cpu_share", c.dali_cpu_share, 0.0, float)
    if c.dali_cpu_share > 0 and not 1 <= round(c.process_batch * c.dali_cpu_share) < c.process_batch:
        raise CaseError(f"dali_cpu_share={c.dali_cpu_share!r} of a batch of {c.process_batch} leaves one pipeline no "
                        f"image; use 0 or a share that gives each pipeline at least one")
    _at_least("dali_prefetch_depth", c.dali_prefetch_depth, 1)
    _at_least("cudnn_benchmark_limit", c.cudnn_benchmark_limit, 0)
    if type(c.input_channels) is not int or c.input_channels not in INPUT_CHANNELS:
        raise CaseError(f"input_channels={c.input_channels!r} is not accepted; use 3 (RGB) or 4 (RGB and a zero channel)")
    if c.input_channels != 3 and not models.STEM_MODELS.match(c.model):
        raise CaseError(f"input_channels={c.input_channels} widens a ResNet stem (conv1); model={c.model!r} has "
                        "none: use a resnet, resnext or wide_resnet model, or input_channels=3")
    check_inductor_options(c.inductor_options)
    _at_least("cuda_max_connections", c.cuda_max_connections, 0)
    if c.cuda_max_connections > MAX_CUDA_CONNECTIONS:
        raise CaseError(f"cuda_max_connections={c.cuda_max_connections!r} must be 0 (as the environment has it) "
                        f"or 1-{MAX_CUDA_CONNECTIONS}, the range CUDA accepts")

    if c.device == "cpu" and c.precision == "tf32":
        raise CaseError("precision='tf32' needs device='cuda'; on cpu use fp32, bf16 or fp16")
    if c.strategy == "single" and c.gpus != 1:
        raise CaseError(f"gpus={c.gpus} with strategy='single'; single runs on exactly 1 GPU (use dp or ddp for more)")
    if c.device == "cpu" and c.strategy == "dp" and c.gpus != 1:
        raise CaseError(f"gpus={c.gpus} with strategy='dp' on device='cpu'; DataParallel on the cpu has one device, so gpus must be 1")
    if c.loader in ("torch", "dali") and not c.data_dir:
        raise CaseError(f"loader={c.loader!r} needs data_dir (an ImageFolder tree; make one with `python -m bench data make`)")
    if c.loader == "dali" and c.device == "cpu" and c.dali_device != "cpu":
        raise CaseError("dali_device='mixed' decodes on a GPU; with device='cpu' use dali_device='cpu'")
    if c.num_workers == 0 and c.persistent_workers:
        raise CaseError("persistent_workers=true needs num_workers >= 1")
    if c.accumulation_steps > 1 and c.strategy != "ddp":
        raise CaseError(f"accumulation_steps={c.accumulation_steps} is measured with strategy='ddp' only")
    if c.dp_output_device >= c.gpus:
        raise CaseError(f"dp_output_device={c.dp_output_device} must be -1 or an index below gpus={c.gpus}")
    if c.strategy != "dp" and (c.dp_device_selection != "default" or c.dp_output_device != -1 or c.dp_loss_in_forward):
        raise CaseError("dp_device_selection, dp_output_device and dp_loss_in_forward apply to strategy='dp' only")
    if c.loader_only and c.loader == "synthetic":
        raise CaseError("loader_only=true measures a real input pipeline; use loader='torch' or 'dali'")
    if c.overhead_check and (c.loader != "synthetic" or c.strategy == "dp" or c.accumulation_steps > 1):
        raise CaseError("overhead_check=true compares loops on one synthetic batch: it needs loader='synthetic', "
                        "strategy single or ddp, and accumulation_steps=1")
    if c.compile in ("reduce-overhead", "max-autotune") and c.device != "cuda":
        raise CaseError(f"compile={c.compile!r} replays CUDA graphs and needs device='cuda'; on the cpu use "
                        "'default' or 'max-autotune-no-cudagraphs'")
    if c.step_stream == "own" and c.device != "cuda":
        raise CaseError("step_stream='own' makes a CUDA stream and needs device='cuda'; "
                        "on the cpu leave it 'default'")
    if c.compile and c.strategy == "dp":
        raise CaseError("compile with strategy='dp' is not supported (DataParallel re-replicates every step); use single or ddp")
    if c.cuda_graph:
        check_cuda_graph(c)
    for pair in c.nccl_env:
        if len(pair) != 2 or not str(pair[0]).startswith("NCCL_"):
            raise CaseError(f"nccl_env entry {pair!r} must be a (name, value) pair whose name starts with NCCL_")
    if c.fault and c.fault_rank >= c.gpus:
        raise CaseError(f"fault_rank={c.fault_rank} must be below gpus={c.gpus}")
    idle = idle_knobs(c)
    if idle:
        name, why = idle[0]
        raise CaseError(f"{name}={getattr(c, name)!r} does nothing here ({why}); leave it at its default "
                        f"{_defaults(type(c))[name]!r}")


def idle_knobs(c) -> list[tuple[str, str]]:
    """Knobs set away from their default in a case where they change nothing: a label must never
    claim a setting that did not act."""
    defaults = _defaults(type(c))
    found = []
    for names, why in identity.idle_rules(c.to_dict()):
        found += [(n, why) for n in names if getattr(c, n) != defaults[n] and (n, why) not in found]
    return found


@functools.cache
def _defaults(cls) -> dict:
    """Each field's default, read once per class (validation runs at every Case made)."""
    return {f.name: f.default for f in fields(cls)}
