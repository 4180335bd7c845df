"""Where the device's time goes, lane by lane: a few optimizer steps after the measured windows under
torch's profiler (CUPTI on a GPU), summarised per CUDA stream (per host thread on the CPU).

On a GPU every kernel, copy and memset of the process is seen, whoever launched it: the training
step's stream, DALI's own streams, NCCL's; and beside them the busiest host threads' time in torch's
ops and CUDA calls. Each lane's busy time is the union of its intervals (what
overlaps within a lane counts once), so a DALI-fed step shows how long DALI's work held the GPU beside
the step's, and `busy_pct` how much of the profiled stretch any lane kept the device busy. The steps run
after the span (`Case.profile_steps`), so the measured figure never carries the profiler's cost.
"""
from __future__ import annotations

import time
from collections import defaultdict

from .context import synchronize

TOP_NAMES = 5
LANES_KEPT = 6
HOST_LANES_KEPT = 2
NAME_CHARS = 90


def run(trainer, batches, ctx, steps: int) -> dict:
    """Profile `steps` optimizer steps; their summary, or the profiler's error (the case stands)."""
    try:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile
        cuda = ctx.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        synchronize(ctx)
        t = time.perf_counter()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                trainer.step(batches)
            synchronize(ctx)
        wall_s = time.perf_counter() - t
        events = defaultdict(list)
        for e in prof.profiler.kineto_results.events():
            if e.duration_ns() > 0:
                events[e.device_type()].append((e.name(), e.device_resource_id(), e.start_ns(), e.duration_ns()))
    except Exception as e:  # a profiler that cannot run here leaves the measured case as it is
        return {"steps": steps, "error": f"{type(e).__name__}: {e}"[:300]}
    if not cuda:
        return {**summarize(events[DeviceType.CPU], steps, "host thread"), "wall_s": wall_s}
    # beside the device's lanes, the host threads' time in torch's ops and CUDA calls: a step the host
    # cannot queue as fast as the device runs it leaves the device idle with no input to blame
    host = summarize(events[DeviceType.CPU], steps, "host thread")
    host["lanes"] = host["lanes"][:HOST_LANES_KEPT]
    return {**summarize(events[DeviceType.CUDA], steps, "cuda stream"), "wall_s": wall_s, "host": host}


def summarize(events: list[tuple[str, int, int, int]], steps: int, lane_kind: str) -> dict:
    """(name, lane, start_ns, duration_ns) events as: the profiled stretch, the share of it any lane kept
    busy, and per lane (busiest first) its busy seconds per step, its share of the stretch and the names
    that took most of its time. Names' times are summed as recorded (on the CPU an op includes the ops it
    called), lanes' busy times are unions."""
    if not events:
        return {"steps": steps, "lane_kind": lane_kind, "span_s": 0.0, "busy_pct": 0.0, "lanes": []}
    begin = min(s for _, _, s, _ in events)
    span_ns = max(s + d for _, _, s, d in events) - begin
    by_lane, names = defaultdict(list), defaultdict(lambda: defaultdict(int))
    for name, lane, start, dur in events:
        by_lane[lane].append((start, start + dur))
        names[lane][name[:NAME_CHARS]] += dur
    lanes = []
    for lane, intervals in by_lane.items():
        busy = union_ns(intervals)
        top = sorted(names[lane].items(), key=lambda kv: -kv[1])[:TOP_NAMES]
        lanes.append({"lane": lane, "busy_s_per_step": busy / 1e9 / steps, "busy_pct": 100.0 * busy / span_ns,
                      "events_per_step": len(intervals) / steps,
                      "top": [[n, ns / 1e9 / steps] for n, ns in top]})
    lanes.sort(key=lambda x: -x["busy_s_per_step"])
    every = [iv for ivs in by_lane.values() for iv in ivs]
    return {"steps": steps, "lane_kind": lane_kind, "span_s": span_ns / 1e9,
            "busy_pct": 100.0 * union_ns(every) / span_ns, "lanes": lanes[:LANES_KEPT]}


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total
