"""Where the time goes in one stored case, and what bounds it."""
from __future__ import annotations

from ..core import model_flops, models
from . import flops

INPUT_BOUND_PCT = 10.0   # a device that sits idle this long waiting for batches is held back by its input
COMM_BOUND_PCT = 10.0    # this much un-hidden all-reduce time bounds a DDP step
GPU_BUSY_PCT = 90.0      # NVML's utilisation at or above this: the GPU had no idle time to give
HOST_BUSY_PCT = 90.0     # the host's cores this busy: a loader that decodes on them has no core to spare
STEAL_PCT = 2.0          # a hypervisor taking this much of the cores' time moves a host-side figure
POWER_CAPPED_PCT = 50.0  # the power cap lowering the clocks in this share of samples: power, not the code, sets the pace


def exposed_comm_pct(ranks: list[dict]) -> float | None:
    """Share of the step that synchronisation adds: measured windows against no-sync windows."""
    shares = []
    for r in ranks:
        if r.get("no_sync_window_s") and r.get("windows_s"):
            sync = sum(r["windows_s"]) / len(r["windows_s"])
            shares.append(max(0.0, 100.0 * (sync - r["no_sync_window_s"]) / sync))
    return max(shares) if shares else None


def harness_overhead_pct(ranks: list[dict]) -> float | None:
    """How much longer the harnessed window took than the minimal loop over the same steps."""
    shares = []
    for r in ranks:
        if r.get("minimal_window_s") and r.get("windows_s"):
            harness = min(r["windows_s"])
            shares.append(100.0 * (harness - r["minimal_window_s"]) / harness)
    return max(shares) if shares else None


def gpu_util(ranks: list[dict]) -> dict:
    merged = {}
    for r in ranks:
        merged.update(r.get("gpu_samples") or {})
    return merged


def counted_flops(ranks: list[dict]) -> float | None:
    """The FLOPs per image that rank 0's worker counted for the model it trained; None in records
    older than that count, or counted another way (model_flops.METHOD)."""
    return next((r["model_flops_per_image"] for r in ranks if r.get("rank") == 0 and "model_flops_per_image" in r
                 and r.get("model_flops_method") == model_flops.METHOD), None)


def diagnose(record: dict, peak: dict | None = None) -> dict:
    if record["status"] != "ok":
        return {}
    case, m, ranks = record["case"], record["metrics"], record["ranks"]
    wait = m["data_wait_pct"]
    stall = m.get("input_stall_pct")  # the device's own idle time for input; older records lack it
    comm = exposed_comm_pct(ranks)
    out = {"data_wait_pct": wait, "input_stall_pct": stall, "comm_exposed_pct": comm,
           "compute_pct": max(0.0, 100.0 - (wait if stall is None else stall) - (comm or 0.0)),
           "harness_overhead_pct": harness_overhead_pct(ranks), "gpu": gpu_util(ranks),
           "host_cpu_busy_pct": m.get("host_cpu_busy_pct"), "host_cpu_steal_pct": m.get("host_cpu_steal_pct")}
    if not case.get("loader_only"):
        per_image = counted_flops(ranks)
        if per_image is None and not models.is_factory(case["model"]):
            # older records: counted here for the torchvision model the case names; a factory a record names is
            # never imported on its say-so (results are data from elsewhere), so such a record has no MFU
            try:
                per_image = flops.training_flops_per_image(case["model"], case["image_size"], case["num_classes"])
            except Exception:  # a name no torchvision model answers to: no MFU, the rest stands
                per_image = None
        if per_image is not None:
            out["model_flops_per_image"], out["flops_method"] = per_image, model_flops.METHOD
        rate = ((peak or {}).get("flops_per_s") or {}).get(case["precision"])
        if rate and per_image is not None:
            out["mfu_pct"] = flops.mfu_pct(m["images_per_s"], per_image, case["gpus"], rate)
            out["peak_flops_per_s"] = rate
    out["verdict"], out["evidence"] = verdict(case, out)
    return out


def host_text(case: dict, d: dict) -> str:
    """The host's cores during the span, where a loader works on them (the torch DataLoader; DALI,
    whose reading and part of its decoding run there even with mixed decoding); said only for such
    cases, and only where the counters were read."""
    busy, steal = d.get("host_cpu_busy_pct"), d.get("host_cpu_steal_pct")
    if busy is None or case.get("loader") not in ("torch", "dali"):
        return ""
    text = f"; host CPUs {busy:.0f}% busy"
    if busy >= HOST_BUSY_PCT:
        text += " (no core to spare for decoding)"
    if steal is not None and steal >= STEAL_PCT:
        text += f", {steal:.1f}% of their time taken by the hypervisor (other guests): a pace no setting here controls"
    return text


def power_text(d: dict) -> str:
    """Where the power cap held a GPU's clocks down through most of the windows: how far below its
    highest clock it ran and how close to its limit it drew (on one H200 the compiled fp16 step drew
    685 W of 700 W). Empty where NVML did not say, or the cap was rarely hit."""
    for g in (d.get("gpu") or {}).values():
        capped = (g.get("power_capped_pct") or {}).get("mean")
        if capped is None or capped < POWER_CAPPED_PCT:
            continue
        clock, power = g.get("sm_clock_mhz") or {}, g.get("power_w") or {}
        text = f"; at its power limit: the power cap held the clocks down in {capped:.0f}% of samples"
        if clock.get("mean") and g.get("sm_clock_max_mhz"):
            text += f", SM clock {clock['mean']:,.0f} of {g['sm_clock_max_mhz']:,.0f} MHz"
        if power.get("mean") and g.get("power_limit_w"):
            text += f", {power['mean']:,.0f} W of {g['power_limit_w']:,.0f} W"
        return text
    return ""


def verdict(case: dict, d: dict) -> tuple[str, str]:
    if case.get("loader_only"):
        return "loader-only", "no model ran: this is the loader's ceiling" + host_text(case, d)
    stall, comm = d.get("input_stall_pct"), d["comm_exposed_pct"]
    # the device's idle time for input decides; records from before it was measured fall back to
    # the host's wait, and say so, since the host can wait while queued GPU work keeps the GPU busy
    wait, whose = (stall, "the device sat idle") if stall is not None else (d["data_wait_pct"], "the host waited (older record)")
    util = [g["gpu_util_pct"]["mean"] for g in d["gpu"].values()] if d["gpu"] else []
    util_text = f", GPU busy {min(util):.0f}% of samples" if util else ""
    if wait >= INPUT_BOUND_PCT and wait >= (comm or 0):
        shared = ""
        if case.get("loader") == "dali" and case.get("dali_device") == "mixed" and util and min(util) >= GPU_BUSY_PCT:
            # the GPU never idled: the pipeline's GPU stage queued behind training, not the CPU
            shared = "; DALI decodes on the same GPU, which training keeps busy"
        return "input-bound", f"{whose} {wait:.0f}% of the window for input{util_text}{shared}{host_text(case, d)}"
    if comm is not None and comm >= COMM_BOUND_PCT:
        return "communication-bound", f"gradient sync adds {comm:.0f}% to the step (no-sync window){util_text}"
    mfu = d.get("mfu_pct")
    if util and min(util) < GPU_BUSY_PCT and case.get("device", "cuda") == "cuda":
        # neither input nor sync kept it waiting, yet the GPU idled: the host queued the work late
        # (on one H200 a compiled step at batch 128: 34.4 ms a step, GPU busy 56% of samples)
        remedy = ("DDP's process per GPU gives each GPU a host thread of its own" if case.get("strategy") == "dp" else
                  "fewer launches a step (a larger batch, a CUDA graph, compile_wrapper=cpp) give it time back")
        return "host-bound", (f"GPU busy {min(util):.0f}% of samples with input stall {wait:.0f}%"
                              + (f" and exposed sync {comm:.0f}%" if comm is not None else "")
                              + f": the host queues each step slower than the GPU runs it; {remedy}" + host_text(case, d))
    return "compute-bound", (f"{'input stall' if stall is not None else 'host data wait'} {wait:.0f}%"
                             + (f", exposed sync {comm:.0f}%" if comm is not None else "")
                             + (f", MFU {mfu:.0f}%" if mfu is not None else "") + util_text + power_text(d))
