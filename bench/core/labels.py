"""Short texts that say exactly what ran and how noisy its figure is, shared by every reader."""
from __future__ import annotations

from .kernel_options import TORCH_CUDNN_BENCHMARK_LIMIT, inductor_names

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def describe(case: dict) -> str:
    """A short label that says exactly what ran (a stored case dict, or Case.to_dict())."""
    parts = [case["strategy"], case["precision"]]
    if case["channels_last"]:
        parts.append("NHWC")
    if case.get("input_channels", 3) != 3:
        parts.append(f"{case['input_channels']}-channel input")
    if case.get("compile"):
        parts.append(f"compile:{case['compile']}" + ("/step" if case.get("compile_scope") == "step" else "")
                     + ("/cpp-wrapper" if case.get("compile_wrapper", "python") == "cpp" else "")
                     + "".join(f"+{n}" for n in inductor_names(case.get("inductor_options", "")))
                     + (" (CUDA graphs)" if case["compile"] in CUDA_GRAPH_MODES else ""))
    if case.get("optimizer_impl", "default") != "default":
        parts.append(f"SGD {case['optimizer_impl']}")
    if case.get("cuda_graph"):
        parts.append("step as one CUDA graph")
    if case.get("step_stream", "default") == "own":
        parts.append("own stream")
    if case.get("cuda_max_connections", 0):
        parts.append(f"{case['cuda_max_connections']} CUDA connections")
    if case["device"] == "cuda" and case.get("cudnn_benchmark", True) is False:
        parts.append("cudnn-benchmark off")
    elif case["device"] == "cuda" and case.get("cudnn_benchmark_limit", TORCH_CUDNN_BENCHMARK_LIMIT) != TORCH_CUDNN_BENCHMARK_LIMIT:
        limit = case["cudnn_benchmark_limit"]
        parts.append("cuDNN times every algorithm" if limit == 0 else f"cuDNN times {limit} algorithm(s)")
    if case["strategy"] == "dp":
        knobs = [k for k, on in (("free-mem GPUs", case["dp_device_selection"] == "free_memory"),
                                 (f"out=gpu{case['dp_output_device']}", case["dp_output_device"] >= 0),
                                 ("loss in fwd", case["dp_loss_in_forward"])) if on]
        parts += knobs
    loader = case["loader"] + (_dali(case) if case["loader"] == "dali" else "")
    if case["loader"] == "torch":
        loader += f"/w{_threads(case['num_workers'])}" + ("/pin" if case["pin_memory"] else "")
    only = ""
    if case.get("loader_only"):  # a loader alone on the CPU (bench feed) has ranks, never GPUs: said where it shows
        only = f" (loader only, {case['gpus']} CPU rank(s), no GPU)" if case["device"] == "cpu" else " (loader only)"
    parts.append(loader + only)
    if case.get("cold_reads"):
        parts.append("cold reads (page cache emptied before each window)")
    if case.get("host_side_only"):
        parts.append("uint8 batches (normalizing left to the GPU)")
    if case.get("accumulation_steps", 1) > 1:
        parts.append(f"accumulate {case['accumulation_steps']} ({case['accumulation_mode']})")
    return ", ".join(parts)


def _dali(case: dict) -> str:
    text = f"/{case['dali_device']}/t{_threads(case['dali_threads'])}"
    if case["dali_device"] == "mixed":  # a case stored before the knob ran at DALI's 0.65
        load = case.get("hw_decoder_load", 0.65)
        text += "/hw-auto" if load == -1 else f"/hw{load:g}"
    depth = case.get("dali_prefetch_depth", 2)
    text += f"/queue{depth}" if depth != 2 else ""
    if case["device"] == "cuda" and case.get("dali_handoff", "host") == "stream":
        text += "/to-stream"
    if case.get("dali_crop", "decoder") == "resize":
        text += "/whole-decode"
    if case.get("dali_cpu_share", 0.0) > 0:
        text += f"/cpu-decodes{case['dali_cpu_share']:g}"
    return text


def _threads(n: int) -> str:
    return "auto" if n == -1 else str(n)  # -1: the machine's cores per rank, stored as loader_threads


def noise(metrics: dict | None) -> str:
    """A figure's 95% interval as +-percent; a record from before intervals shows its windows' spread."""
    if not metrics:
        return "-"
    ci = metrics.get("images_per_s_ci95")
    if ci:
        return f"+-{100 * (ci[1] - ci[0]) / 2 / metrics['images_per_s']:.1f}%"
    return f"(spread {metrics['spread_pct']:.1f}%)"  # one process's windows only: no interval


def duration(s: float | None) -> str:
    """Seconds as `4m05s`."""
    if s is None:
        return "no stored time"
    return f"{int(s // 60)}m{int(s % 60):02d}s"


PROFILE_NAME_CHARS = 100


def profile_text(record: dict) -> str:
    """Rank 0's profiled steps (`profile_steps`), lane by lane, as lines under a case's summary line and in
    the report (nothing when none ran)."""
    p = ((record.get("ranks") or [{}])[0] or {}).get("profile")
    if not p:
        return ""
    if p.get("error"):
        return f"\n  profile: not taken ({p['error']})"
    lines = [f"\n  profile, {p['steps']} steps after the windows: device busy {p['busy_pct']:.0f}% of "
             f"{p['span_s'] * 1000:,.0f} ms" if p["lane_kind"] == "cuda stream" else
             f"\n  profile, {p['steps']} steps after the windows ({p['span_s'] * 1000:,.0f} ms), by host thread"]
    for kind, lane in [(p["lane_kind"], lane) for lane in p["lanes"]] + \
            [("host thread", lane) for lane in (p.get("host") or {}).get("lanes", [])]:
        lines.append(f"\n    {kind} {lane['lane']}: {lane['busy_s_per_step'] * 1000:,.1f} ms a step "
                     f"({lane['busy_pct']:.0f}%)")
        # a line per name, cut to fit 120 columns (kernels' names run long)
        lines += [f"\n      {s * 1000:6,.1f} ms  {name[:PROFILE_NAME_CHARS]}" for name, s in lane["top"][:3]]
    return "".join(lines)
