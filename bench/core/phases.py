"""Where a process's time goes, from the marks its worker and its launcher left (epoch seconds on one
host): a case should cost little more than its measured windows."""
from __future__ import annotations

PHASES = (
    ("startup_s", "start-up", "interpreter and imports (torchrun's too) after the launcher let it go"),
    ("setup_s", "set-up", "device, process group, model, optimizer and loader"),
    ("first_step_s", "first step", "compilation, cuDNN autotuning, NCCL's first collective"),
    ("warmup_s", "warm-up", "label check, prefetched batches drained, warm-up and settling steps"),
    ("windows_s", "windows", "the measured windows"),
    ("after_s", "after", "the windows that explain the measured ones, and the compiled-dtype probe"),
    ("teardown_s", "teardown", "the record written, the loader and the process ended"),
)
"""(key, column heading, what it holds), in the order a process goes through them."""
SPANS = dict(zip((k for k, _, _ in PHASES), (
    ("go", "go"), ("go", "first_step_start"), ("first_step_start", "first_step_end"),
    ("first_step_end", "span_start"), ("span_start", "span_end"), ("span_end", "returned"),
    ("returned", "ended"))))
"""Each phase as (from mark, to mark); `go` is the launcher's for start-up's start, the worker's after."""


def process_phases(rank_marks: dict, launch_marks: dict) -> dict:
    """Seconds per phase of one process (rank 0's marks); a phase whose marks are missing (the process
    failed before it) is left out. `started_ahead_s`: how long it existed before it was let go, its
    imports hidden behind the previous process."""
    marks = {**{f"worker_{k}": v for k, v in rank_marks.items()}, **launch_marks}
    out = {}
    for key, (start, end) in SPANS.items():
        a = marks.get("go" if key == "startup_s" else f"worker_{start}")
        b = marks.get(end) if end == "ended" else marks.get(f"worker_{end}")
        if a is not None and b is not None:
            out[key] = max(0.0, b - a)
    if "go" in launch_marks and "spawned" in launch_marks:
        out["started_ahead_s"] = max(0.0, launch_marks["go"] - launch_marks["spawned"])
    return out


def total(phases: list[dict]) -> dict:
    """Phases summed over processes (a case's or a sweep's)."""
    out: dict = {}
    for p in phases:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    return out


def windows_share_pct(phases: dict) -> float | None:
    """The measured windows' share of the process time accounted for."""
    spent = sum(v for k, v in phases.items() if k != "started_ahead_s")
    return 100.0 * phases["windows_s"] / spent if spent and "windows_s" in phases else None


def summary_text(phases: dict, processes: int) -> str:
    """One line: where the processes' time went, largest share first, and the windows' share."""
    spent = sum(v for k, v in phases.items() if k != "started_ahead_s")
    if not spent:
        return ""
    names = {k: name for k, name, _ in PHASES}
    parts = sorted(((v, names[k]) for k, v in phases.items() if k in names and v >= 0.05 * spent), reverse=True)
    share = windows_share_pct(phases) or 0.0
    return (f"{processes} process(es), {spent:.0f} s: measured windows {share:.0f}%; "
            + ", ".join(f"{name} {100 * v / spent:.0f}%" for v, name in parts if name != "windows"))
