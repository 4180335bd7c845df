"""Which knobs make a case what it is: the one definition behind case ids, compare, claims, history,
the recommend search and the pytest front end.

A case's *knobs* are every field except those that say how long or how often it was measured, and
where its JPEGs lie (a path, not a configuration). Its *id* names the recipe and the knobs set away
from ID_DEFAULTS (plus model, image size, device and GPU count, always), so a knob added later with a
default changes no id, and a stored case, read with the fields it predates at their defaults, gets
the id it would get today. The id is computed from the stored case whenever a record is read.
"""
from __future__ import annotations

import hashlib
import json

from . import models

ID_DEFAULTS = {
    "name": "custom", "model": "resnet50", "num_classes": 1000, "image_size": 224, "device": "cuda", "gpus": 1,
    "strategy": "single", "batch_size": 256, "precision": "fp32", "channels_last": False, "cudnn_benchmark": True,
    "compile": "", "compile_scope": "model", "optimizer_impl": "default", "loader": "synthetic", "data_dir": "",
    "num_workers": 0, "pin_memory": False, "non_blocking": False, "persistent_workers": False, "prefetch_factor": 2,
    "loader_only": False, "dali_device": "mixed", "hw_decoder_load": 0.65, "dali_threads": -1,
    "dp_device_selection": "default", "dp_output_device": -1, "dp_loss_in_forward": False, "bucket_cap_mb": 25.0,
    "gradient_as_bucket_view": False, "static_graph": False, "broadcast_buffers": True, "accumulation_steps": 1,
    "accumulation_mode": "article", "nccl_env": [], "warmup_steps": 10, "steps": 30, "min_window_s": 0.0,
    "repeats": 3, "timeout_s": 900.0, "seed": 0, "overhead_check": False, "fault": "", "fault_rank": 0,
    "cuda_graph": False, "dali_prefetch_depth": 2, "dali_handoff": "host", "profile_steps": 0,
    "dali_crop": "decoder", "compile_wrapper": "python", "step_stream": "default",
    "dali_cpu_share": 0.0, "cuda_max_connections": 0, "cudnn_benchmark_limit": 10, "inductor_options": "",
    "input_channels": 3, "model_source": "", "model_path": "", "cold_reads": False,
    "host_side_only": False,
}
"""Each field's value when ids were fixed, frozen: a field set to it is left out of the id. A new
field is added here with its default (a stored case predates it and ran that way); a Case default
that changes later does not change this table, so the old default stays in the ids of new cases
that keep it."""

MEASUREMENT_FIELDS = frozenset({"name", "warmup_steps", "steps", "min_window_s", "repeats", "timeout_s",
                                "overhead_check", "profile_steps", "fault", "fault_rank"})
"""How long or how often a case was measured (and which recipe made it), not what ran."""
WHERE_FIELDS = frozenset({"data_dir", "model_path"})
"""Where a case's input lies on one machine: the same configuration reads it from anywhere."""
ALWAYS_IN_ID = ("name", "model", "image_size", "device", "gpus")


def fields_of(case) -> dict:
    """A Case or a stored case dict as plain JSON values, the fields it predates at their ID_DEFAULTS."""
    d = case if isinstance(case, dict) else case.to_dict()
    return json.loads(json.dumps({**ID_DEFAULTS, **d}))


def idle_rules(c: dict) -> list[tuple[tuple[str, ...], str]]:
    """(knobs, why) that change nothing in this case: validation refuses them away from their
    defaults, and a stored case that carried one (a default that has changed since) keeps its id."""
    rules = [
        (("model_source",), not models.is_factory(c["model"]) and not models.is_timm(c["model"]),
         "it identifies a factory package.module:function, or timm's version for timm/NAME"),
        (("model_path",), not models.is_factory(c["model"]), "it locates a factory package.module:function"),
        (("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "broadcast_buffers"),
         c["strategy"] != "ddp", "DDP knobs need strategy='ddp'"),
        (("nccl_env",), c["strategy"] != "ddp" or c["device"] != "cuda", "NCCL runs only under ddp on cuda"),
        (("num_workers", "pin_memory", "non_blocking", "persistent_workers", "prefetch_factor"),
         c["loader"] != "torch", "torch DataLoader knobs need loader='torch'"),
        (("prefetch_factor",), c["num_workers"] == 0, "prefetch_factor needs num_workers >= 1"),
        (("pin_memory", "non_blocking"), c["device"] != "cuda", "host-to-GPU copy knobs need device='cuda'"),
        (("cuda_max_connections",), c["device"] != "cuda", "CUDA's hardware work queues need device='cuda'"),
        (("cold_reads",), c["loader"] == "synthetic", "cold_reads needs a real loader"),
        (("host_side_only",), c["loader"] != "torch" or not c["loader_only"] or c["device"] != "cpu",
         "host_side_only needs loader='torch', loader_only and device='cpu'"),
        (("dali_device", "hw_decoder_load", "dali_threads", "dali_prefetch_depth", "dali_handoff", "dali_crop",
          "dali_cpu_share"), c["loader"] != "dali", "DALI knobs need loader='dali'"),
        (("dali_handoff",), c["device"] != "cuda", "DALI's hand-over to a CUDA stream needs device='cuda'"),
        (("hw_decoder_load",), c["dali_device"] != "mixed", "the hardware decoder is used by dali_device='mixed' only"),
        (("accumulation_mode",), c["accumulation_steps"] == 1, "accumulation_mode needs accumulation_steps > 1"),
        (("compile_scope",), not c["compile"], "compile_scope needs compile"),
        (("compile_wrapper",), not c["compile"], "compile_wrapper needs compile"),
        (("inductor_options",), not c["compile"], "inductor_options needs compile"),
        (("cudnn_benchmark_limit",), c["device"] != "cuda" or not c["cudnn_benchmark"],
         "cudnn_benchmark_limit needs device='cuda' and cudnn_benchmark"),
        (("precision", "compile", "compile_scope", "compile_wrapper", "cudnn_benchmark", "overhead_check", "optimizer_impl",
          "cuda_graph", "inductor_options", "cudnn_benchmark_limit", "input_channels"),
         c["loader_only"], "loader_only=true runs no model"),
    ]
    return [(names, why) for names, idle, why in rules if idle]


def acting(case) -> dict:
    """The case's fields with those idle in it read as their ID_DEFAULTS: what it did, however an
    idle knob was set (an earlier default, say)."""
    f = fields_of(case)
    idle = {n for names, _ in idle_rules(f) for n in names}
    return {k: (ID_DEFAULTS[k] if k in idle else v) for k, v in f.items()}


def id_knobs(case) -> dict:
    """What enters the id's digest: the recipe, model, image size, device and GPUs, and every knob
    that acts in this case away from its ID_DEFAULTS value."""
    return {k: v for k, v in acting(case).items() if k in ALWAYS_IN_ID or
            (k not in MEASUREMENT_FIELDS and k not in WHERE_FIELDS and v != ID_DEFAULTS.get(k))}


def case_id(case) -> str:
    """Readable parts (recipe, model, strategy, GPUs, batch, precision, loader, ...) and a digest of
    `id_knobs`, so two cases share an id exactly when they measured the same configuration."""
    c = fields_of(case)
    model = c["model"].replace(":", "-").replace("/", "-") + (f"-{c['model_source'][:8]}" if c["model_source"] else "")
    parts = [c["name"], model, c["strategy"], f"g{c['gpus']}", f"bs{c['batch_size']}",
             c["precision"] + ("-cl" if c["channels_last"] else ""), c["loader"]]
    if c["input_channels"] != 3:
        parts.insert(-1, f"{c['input_channels']}ch")  # beside the precision and layout: what the stem reads
    if c["loader"] == "dali":
        parts.append(c["dali_device"])
    if c["accumulation_steps"] > 1:
        parts.append(f"acc{c['accumulation_steps']}-{c['accumulation_mode']}")
    if c["compile"]:
        parts.append("compile-" + c["compile"] + ("-step" if c["compile_scope"] == "step" else "")
                     + ("-cpp" if c["compile_wrapper"] == "cpp" else ""))
    if c["optimizer_impl"] != "default":
        parts.append("sgd-" + c["optimizer_impl"])
    if c["cuda_graph"]:
        parts.append("cuda-graph")
    if c["loader_only"]:
        parts.append("loader-only")
    if c["cold_reads"]:
        parts.append("cold")
    if c["host_side_only"]:
        parts.append("host-side")
    parts += [f"{c['image_size']}px", c["device"]]
    digest = hashlib.sha1(json.dumps(id_knobs(c), sort_keys=True).encode()).hexdigest()[:8]
    return "-".join(str(p) for p in parts) + "-" + digest


def knobs(case, ignore: frozenset | set = frozenset()) -> dict:
    """What ran: every acting field but the measurement and where-fields (and `ignore`)."""
    return {k: v for k, v in acting(case).items()
            if k not in MEASUREMENT_FIELDS and k not in WHERE_FIELDS and k not in ignore}


def knobs_key(case, ignore: frozenset | set = frozenset()) -> str:
    """`knobs` as one string: equal for two cases exactly when they measured the same configuration."""
    return json.dumps(knobs(case, ignore), sort_keys=True)


def differing_fields(a, b) -> set[str]:
    """The knobs two cases (Cases or stored dicts) differ in."""
    ka, kb = knobs(a), knobs(b)
    return {k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k)}
