"""The host's CPU time over a stretch of wall time, from the kernel's counters (/proc/stat): how busy
all its cores were, and how much of their time a hypervisor gave to other guests (steal). A real
loader decodes on these cores, so its pace follows both; neither is the suite's own choice."""
from __future__ import annotations

import os
import socket
from pathlib import Path

from ..core import procfs

# the first eight columns of the "cpu" line, in clock ticks summed over every core; guest time is
# already inside user and nice, so it is not counted twice
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BUSY = ("user", "nice", "system", "irq", "softirq")
STAT = Path("/proc/stat")


def read(stat: Path = STAT) -> dict | None:
    """The machine-wide counters now, or None where the kernel does not offer them (not Linux)."""
    try:
        with open(stat) as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    values = [int(v) for v in first[1:1 + len(FIELDS)]]
    values += [0] * (len(FIELDS) - len(values))  # old kernels stop before steal
    return dict(zip(FIELDS, values))


def shares(before: dict | None, after: dict | None) -> dict | None:
    """Busy and stolen shares of every core's time between two readings, in percent."""
    if not before or not after:
        return None
    delta = {k: after[k] - before[k] for k in FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return None  # under one clock tick apart: nothing to divide
    return {"busy_pct": 100.0 * sum(delta[k] for k in BUSY) / total,
            "steal_pct": 100.0 * delta["steal"] / total}


def over_windows(readings: list[dict | None]) -> dict:
    """From a reading at the span's start and one after each window: the span's shares and each
    window's, as record fields (None where the counters were missing)."""
    span = shares(readings[0], readings[-1]) if len(readings) > 1 else None
    windows = [shares(a, b) for a, b in zip(readings, readings[1:])]
    return {"host_cpu_busy_pct": span and span["busy_pct"], "host_cpu_steal_pct": span and span["steal_pct"],
            "host_cpu_busy_pct_windows": [w and w["busy_pct"] for w in windows],
            "host_cpu_steal_pct_windows": [w and w["steal_pct"] for w in windows]}


def own_ticks(root_pid: int | None = None, proc: Path = Path("/proc"), table: dict | None = None) -> int | None:
    """CPU ticks (user and system) this process and every live process it started have used, and
    the children it has reaped: the run's own share of the host (a torch DataLoader's workers are
    child processes, DALI's threads live inside it). None where /proc cannot say. `table`: a listing
    (core/procfs.process_table) the caller has just read."""
    root_pid = root_pid or os.getpid()
    table = procfs.process_table(proc) if table is None else table
    pids = procfs.tree(root_pid, table)
    if not pids:
        return None
    f = table[root_pid]
    # utime and stime of each; cutime and cstime of the root: its children already reaped
    return sum(int(table[p][11]) + int(table[p][12]) for p in pids) + int(f[13]) + int(f[14])


def span_ticks(before: dict | None, after: dict | None, own_before: int | None, own_after: int | None) -> dict:
    """The host's busy and total ticks and this process tree's own over the span, as record fields
    (core/sharing.host_outside_pct reads them)."""
    if not before or not after or own_before is None or own_after is None:
        return {}
    delta = {k: after[k] - before[k] for k in FIELDS}
    return {"host_cpu_ticks": {"host": socket.gethostname(), "busy": sum(delta[k] for k in BUSY),
                               "total": sum(delta.values())},
            "own_cpu_ticks": own_after - own_before}
