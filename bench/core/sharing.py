"""Whether a measurement had the machine to itself: the rules that read what NVML saw on a GPU (other
compute processes, memory the run did not allocate, utilisation while none of the run's processes
was on it) and what the kernel saw on the host (CPU time of processes outside the run), and the one
line that says what was seen. Pure: the GPU's readings are taken in harness/gpu_guard.py and, during
a case's windows, by the worker's sampler."""
from __future__ import annotations

MIB = 2 ** 20
FOREIGN_MEMORY_BYTES = 256 * MIB
"""Memory in use on a GPU none of the run's processes holds that says another CUDA context does. On one
H100 NVML's v2 `used` (the driver's reserve left out) read 0 idle and 785 MiB for a bare torch context."""
FOREIGN_MEMORY_V1_BYTES = 1024 * MIB
"""The same where NVML has only its v1 call, whose `used` counts the driver's reserve (480 MiB idle on
that H100, 1,265 MiB with the bare context)."""
MEMORY_RISE_BYTES = 1024 * MIB
"""Growth of the memory the case's own allocator does not explain (NVML's `used` less torch's reserved
bytes) during the windows that says another process came: NCCL and DALI buffers lie outside torch's
allocator but are made before the windows, a new context with its work takes more."""
BUSY_UTIL_PCT = 5.0
"""Mean utilisation over a second, with none of the run's processes on the GPU, that says someone
else's kernels run there (an idle GPU reads 0)."""
HOST_OUTSIDE_PCT = 10.0
"""Share of all the host's cores busy outside the run during a real loader's windows above which the
record is marked: a real loader decodes on those cores, so another job's load moves its figure."""

def sighting(gpu: int, when: str, at: str, processes: list[dict], memory_used_bytes: int | None,
             util_pct: float | None = None, memory_rise_bytes: int | None = None) -> dict:
    """What one look at one GPU found that is not the run's, as a record keeps it."""
    out = {"gpu": gpu, "when": when, "at": at, "processes": processes, "memory_used_bytes": memory_used_bytes,
           "util_pct": util_pct}
    if memory_rise_bytes is not None:
        out["memory_rise_bytes"] = memory_rise_bytes
    return out


def foreign(processes: list[dict], memory_used_bytes: int | None, memory_kind: str, util_pct: float | None) -> bool:
    """Whether a look at a GPU holding none of the run's processes found someone else there."""
    limit = FOREIGN_MEMORY_BYTES if memory_kind == "v2" else FOREIGN_MEMORY_V1_BYTES
    return bool(processes) or (memory_used_bytes or 0) > limit or (util_pct or 0) >= BUSY_UTIL_PCT


def during_windows(ranks: list[dict], at: str) -> list[dict]:
    """What the case's own samplers saw on its GPUs during its windows that was not the case's: a
    compute process none of its ranks is, or memory its allocator does not explain growing by
    MEMORY_RISE_BYTES or more. Where NVML's process ids are not this namespace's (none of the ranks'
    own ids appears), a device listing more processes than the case put there counts instead."""
    own = {r.get("pid") for r in ranks if r.get("pid")}
    out = []
    for r in ranks:
        for device, s in (r.get("gpu_samples") or {}).items():
            pids = {int(p): m for p, m in (s.get("compute_pids") or {}).items()}
            ours_visible = bool(own & set(pids))
            others = {p: m for p, m in pids.items() if p not in own} if ours_visible else \
                (pids if len(pids) > 1 else {})
            rise = s.get("memory_rise_bytes")
            if not others and (rise or 0) < MEMORY_RISE_BYTES:
                continue
            gpu = int(device.split(":")[-1]) if ":" in device else 0
            procs = [{"pid": p, "memory_bytes": m} for p, m in sorted(others.items())]
            out.append(sighting(gpu, "during the windows", at, procs, (s.get("memory_used_bytes") or {}).get("max"),
                                None, rise if (rise or 0) >= MEMORY_RISE_BYTES else None))
    return out


def text(s: dict) -> str:
    """One line: what was seen on which GPU, and when."""
    parts = []
    for p in s.get("processes") or []:
        what = p.get("command") or ""
        mem = p.get("memory_bytes")
        inner = ", ".join(x for x in (what, f"{mem / 2**30:.1f} GiB" if mem else "") if x)
        parts.append(f"pid {p['pid']}" + (f" ({inner})" if inner else ""))
    if s.get("memory_used_bytes") is not None:
        parts.append(f"{s['memory_used_bytes'] / 2**30:.1f} GiB in use")
    if s.get("memory_rise_bytes"):
        parts.append(f"{s['memory_rise_bytes'] / 2**30:.1f} GiB more than the case allocated")
    if s.get("util_pct") is not None:
        parts.append(f"utilisation {s['util_pct']:.0f}%")
    return f"GPU {s['gpu']}: {', '.join(parts) or 'in use'} ({s['when']}, {s['at']})"


def summary(sightings: list[dict], limit: int = 2) -> str:
    """The first sightings' lines joined, with how many more there were."""
    lines = [text(s) for s in sightings[:limit]]
    more = len(sightings) - limit
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")


def host_outside_pct(ranks: list[dict]) -> float | None:
    """Share of all a host's cores, in percent, busy outside the run during the windows: the host's
    busy ticks less its ranks' own (each rank's process and the loader workers it started), over the
    host's ticks; the busiest host where ranks span several. The first rank of a host that read its
    counters stands for it. None where a rank could not read its own."""
    hosts: dict = {}
    for r in ranks:
        ticks = r.get("host_cpu_ticks")
        if not ticks:
            continue
        if r.get("own_cpu_ticks") is None:
            return None
        h = hosts.setdefault(ticks.get("host", ""), {"ticks": ticks, "own": 0})
        h["own"] += r["own_cpu_ticks"]
    shares = [max(0.0, 100.0 * (h["ticks"]["busy"] - h["own"]) / h["ticks"]["total"])
              for h in hosts.values() if h["ticks"]["total"] > 0]
    return max(shares) if shares else None
