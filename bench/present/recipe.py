"""The winners of `bench recommend` as training scripts to copy: a plain PyTorch loop with exactly the
measured settings, which times itself the way the suite does (warm-up first, the windows back to back
as one span synchronised at its edges, the slowest rank's time) and prints its own images/s.

`recipe_<N>gpu.py` trains on one synthetic batch made once on the device, as its measured case did, and
needs torch and torchvision only (`recipe_<N>gpu_<model>.py` for a model other than ResNet-50).
`recipe_<N>gpu_jpeg.py` reads the user's JPEG folder (`--data`) through the loader that won the fed
search, DALI or the torch DataLoader, with its measured knobs.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..core import models
from ..core.case import Case
from ..core.case_checks import CUDA_CONNECTIONS_VAR
from ..store.query import ARTICLE_MODEL
from . import recipe_inputs, recipe_script

RECIPE_KNOBS = ("model", "num_classes", "image_size", "device", "gpus", "strategy", "batch_size", "precision",
                "channels_last", "input_channels", "cudnn_benchmark", "cudnn_benchmark_limit", "compile",
                "compile_scope", "compile_wrapper", "inductor_options", "optimizer_impl",
                "cuda_graph", "step_stream", "bucket_cap_mb", "gradient_as_bucket_view", "static_graph",
                "broadcast_buffers", "seed", "cuda_max_connections")
LOADER_KNOBS = {"dali": ("dali_device", "hw_decoder_load", "dali_threads", "dali_prefetch_depth", "dali_handoff",
                         "dali_crop", "dali_cpu_share"),
                "torch": ("num_workers", "pin_memory", "non_blocking", "persistent_workers", "prefetch_factor")}
BLOCKS = {"synthetic": recipe_inputs.SYNTHETIC, "dali": recipe_inputs.DALI, "torch": recipe_inputs.TORCH}


def file_name(case: Case) -> str:
    """recipe_<N>gpu[_<model>][_jpeg].py: the article's ResNet-50 unnamed, any other model named, so
    each model keeps its own latest winner."""
    model = "" if case.model == ARTICLE_MODEL else "_" + re.sub(r"\W", "_", case.model)
    return f"recipe_{case.gpus}gpu{model}" + ("" if case.loader == "synthetic" else "_jpeg") + ".py"


def build_model_lines(case: Case) -> str:
    """The script's lines that make the network as the suite built it: a torchvision model with what
    its constructor was told, timm's as timm builds it, or the user's factory imported from where it lay
    when measured."""
    if models.is_timm(case.model):
        name = case.model[len(models.TIMM_PREFIX):]
        return (f"    import timm  # measured with timm {case.model_source}\n"
                f'    try:  # built for the image size where its constructor takes one, as the suite built it\n'
                f'        model = timm.create_model({name!r}, pretrained=False, num_classes=S["num_classes"], '
                f'img_size={case.image_size})\n'
                f"    except TypeError:\n"
                f'        model = timm.create_model({name!r}, pretrained=False, num_classes=S["num_classes"])')
    if not models.is_factory(case.model):
        kwargs = "".join(f", {k}={v!r}" for k, v in models.constructor_kwargs(case.model, case.image_size).items())
        return ('    model = torchvision.models.get_model(S["model"], weights=None, num_classes=S["num_classes"]'
                f"{kwargs})")
    module, factory = case.model.split(":")
    return (f"    sys.path.insert(0, {case.model_path!r})  # where the factory's package lay when measured\n"
            f"    from {module} import {factory}  # its source then hashed to {case.model_source}\n"
            f'    model = {factory}(num_classes=S["num_classes"])')


def command(case: Case, path: str) -> str:
    data = "" if case.loader == "synthetic" else " --data DIR"
    if case.strategy == "ddp":
        return f"torchrun --standalone --nproc-per-node {case.gpus} {path}{data}"
    return f"python {path}{data}"


def settings_of(case: Case, record: dict) -> dict:
    """The knobs the script sets: the model's, and its loader's as they ran (a hardware decoder share
    chosen for the GPU is written as the share that was used)."""
    s = {k: getattr(case, k) for k in RECIPE_KNOBS}
    s["loader"] = case.loader
    for k in LOADER_KNOBS.get(case.loader, ()):
        s[k] = getattr(case, k)
    used = next((r.get("hw_decoder_load_used") for r in record.get("ranks") or [] if "hw_decoder_load_used" in r), None)
    if case.loader == "dali" and s["hw_decoder_load"] == -1:
        s["hw_decoder_load"] = used if used is not None else 0.65  # DALI's own default where none was recorded
    return s


def render(case: Case, record: dict, label: str) -> str:
    """The script for this case; `record` is the measured figure it reproduces."""
    m = record["metrics"]
    ci = m.get("images_per_s_ci95")
    measured = f"{m['images_per_s']:,.1f} images/s" + (f" (95% interval {ci[0]:,.1f}-{ci[1]:,.1f})" if ci else "")
    settings = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in settings_of(case, record).items()) + "}"
    unit = "GPU" if case.device == "cuda" else "CPU process"
    fed = case.loader != "synthetic"
    loader = {"dali": "NVIDIA DALI", "torch": "the torch DataLoader"}.get(case.loader, "")
    title = f"{case.model} training on {case.gpus} {unit}(s)" + (
        f" fed by JPEGs through {loader}: the fastest the suite found." if fed else
        ": the fastest configuration the suite found.")
    input_note = (f"It reads the ImageFolder tree given by --data (ROOT/<class>/<image>.jpg) through {loader}, "
                  "as measured." if fed else
                  "The input is one synthetic batch made once on the device, as in the measurement; feed\n"
                  "your own loader for real data (recipe_<N>gpu_jpeg.py does, where the suite measured one).")
    text = recipe_script.HEAD + BLOCKS[case.loader] + recipe_script.MAIN
    where = {"mixed": "on the GPU, its hardware decoders taking the share set below"}.get(case.dali_device, "on the CPU")
    decode = ("only the random crop's region of each JPEG " if case.dali_crop == "decoder" else "whole images ") + f"({where})"
    return text.format(
        title=title, machine=record["machine"], commit=record["commit_folder"], run_id=record["run_id"],
        measured=measured, label=label, how=command(case, file_name(case)), settings=settings,
        input_note=input_note, decode=decode, build_model=build_model_lines(case),
        queues=queues_line(case.cuda_max_connections),
        data_arg=('p.add_argument("--data", required=True, help="ImageFolder tree of JPEGs: ROOT/<class>/<image>.jpg")'
                  if fed else "# the input is synthetic: no data folder"),
        source="batches(device, rank, world, a.data)" if fed else "batches(device, rank, world)",
        warmup=max(case.warmup_steps, 3), steps=m.get("steps_per_window") or case.steps, windows=case.repeats)


def queues_line(connections: int) -> str:
    """The line that gives the script's CUDA context the measured hardware work queues (none for the default)."""
    if not connections:
        return ""
    return ("\n# read by the driver when CUDA starts: the streams spread over this many hardware work queues\n"
            f"os.environ[{CUDA_CONNECTIONS_VAR!r}] = {str(connections)!r}\n")


def write(case: Case, record: dict, label: str, folder: Path) -> Path:
    """Write the recipe into the machine's recipes folder, replacing the one a run before wrote for the
    same GPU count and input: the machine's latest winner. The records it came from stay stored, and
    the script names its run, so an older one is `bench run` of that record away."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(case)
    path.write_text(render(case, record, label))
    return path
