"""What a case is expected to cost here: the times this machine's stored results took for the same
recipe, their windows rescaled to the case's window settings (never a guess: a recipe with no stored
time on this machine has none). `sweep --dry-run`, the sweep's time left and the recommend budget use it."""
from __future__ import annotations

import statistics

from ..core import phases
from ..core.case import Case
from ..store import query


def seconds_per_process(result: dict) -> float:
    """A case's wall time over the fresh processes it ran in (a record or a launcher's result)."""
    return (result.get("wall_s") or 0.0) / max(1, len(result.get("processes") or []))


def _parts(d: dict) -> tuple[float, float | None]:
    """One stored result's seconds per process split into what does not depend on the window
    settings (start-up, compilation, warm-up, extra windows) and its seconds per step, so a case whose
    windows are now longer or more is expected to take that much longer. A record without its windows
    (a failure, an old schema) gives its whole time, and no step time."""
    per_process = seconds_per_process(d)
    m, procs = d.get("metrics") or {}, d.get("processes") or []
    steps = m.get("steps_per_window")
    spans = [max(sum(w) for w in p["windows_s"]) for p in procs if p.get("windows_s") and all(p["windows_s"])]
    if d.get("status") != "ok" or not steps or len(spans) != len(procs):
        return per_process, None
    windows = len(m.get("images_per_s_repeats") or []) or 1
    span_s = statistics.fmean(spans)
    step_s = span_s / (steps * windows)
    settle = max((r.get("settle_steps_run") or 0 for r in d.get("ranks") or []), default=0)
    return max(0.0, per_process - span_s - settle * step_s), step_s


def per_process_times(records: list[query.Record]) -> dict:
    """By (recipe name, GPUs), from stored records of any commit and the noise floors of their runs:
    the median seconds a fresh process spent outside its windows, and the median seconds per step
    (None where no stored record kept its windows). `expected_s` turns them into one case's time."""
    parts: dict = {}
    for r in records:
        d = r.data
        if d.get("wall_s") and r.status in ("ok", "oom", "error", "timeout"):
            parts.setdefault((d["case"]["name"], d["case"]["gpus"]), []).append(_parts(d))
    for manifest in query.run_manifests(records).values():
        for key in ("noise_floor", "noise_floor_end"):
            floor = manifest.get(key) or {}
            if floor.get("process_wall_s") and floor.get("case"):
                parts.setdefault((floor["case"]["name"], floor["case"]["gpus"]), []).extend(
                    (w, None) for w in floor["process_wall_s"])
    shares: dict = {}
    for r in records:
        for p in r.data.get("processes") or []:
            share = phases.windows_share_pct(p.get("phases_s") or {})
            if share is not None:
                shares.setdefault((r.case["name"], r.case["gpus"]), []).append(share)
    for manifest in query.run_manifests(records).values():
        for key in ("noise_floor", "noise_floor_end"):
            floor = manifest.get(key) or {}
            for p in floor.get("phases_s") or []:
                share = phases.windows_share_pct(p)
                if share is not None and floor.get("case"):
                    shares.setdefault((floor["case"]["name"], floor["case"]["gpus"]), []).append(share)
    times = {}
    for k, v in parts.items():
        steps = [s for _, s in v if s is not None]
        # a whole time still holds its windows: used only where no record of the recipe split them out
        outside = [o for o, s in v if s is not None] or [o for o, _ in v]
        times[k] = {"outside_windows_s": statistics.median(outside),
                    "step_s": statistics.median(steps) if steps else None,
                    "windows_pct": statistics.median(shares[k]) if k in shares else None}
    return times


def windows_pct(case: Case, times: dict) -> float | None:
    """The stored share of this recipe's process time spent in measured windows (None where no stored
    process kept its phases)."""
    return (times.get((case.name, case.gpus)) or {}).get("windows_pct")


def expected_s(case: Case, times: dict) -> float | None:
    """Seconds one fresh process of this case should take here: the stored time outside the windows,
    plus its windows at the stored pace under this case's settings (at least `steps` steps and
    `min_window_s` each, and one unmeasured window first where a real loader feeds it); None where
    its recipe has no stored time on this machine."""
    t = times.get((case.name, case.gpus))
    if t is None:
        return None
    if t["step_s"] is None:
        return t["outside_windows_s"]
    window_s = max(case.steps * t["step_s"], case.min_window_s)
    settle = 1 if case.loader != "synthetic" else 0
    return t["outside_windows_s"] + (case.repeats + settle) * window_s


CPP_WRAPPER_COST_FACTOR = 2.5
"""A compiled case with the C++ wrapper, not run yet, against one with the Python wrapper: on one H200 the
fed step at batch 512 was still in its first step after 134 s with it, against 56 s without."""
COMPILE_COST_FACTOR = 3.0
"""A compiled candidate's process, until one is measured: about three eager ones (about 40 s of
compiling on one H200 beside an eager process of about 25 s)."""
EMULATED_PRECISION_COST_FACTOR = 5.0
"""A bf16 or fp16 candidate's process on a CPU without native bf16 (procfs.native_bf16), until one is measured:
about five fp32 ones. On a 2-core x86 host a recommend process of ResNet-18 at batch 12 took 8-11 s in bf16
(726.9 ms a step) against about 2 s in fp32 (141.6 ms), and so spent the share kept for the JPEG-fed winner."""
CACHED_FIRST_STEP_S = 15.0
"""A compiled case's first step in a fresh process once Inductor's on-disk cache holds its graphs (the
suite keeps that cache between processes): 7.2-9.2 s on one H200, against 45-75 s cold."""


def compiled_again_s(record: dict) -> float:
    """Seconds per process of a compiled case measured before on this machine, run again: its first
    steps' compilation replaced by a cached one, so confirming a compiled candidate costs about what an
    eager one does (a record without phases gives its whole time)."""
    firsts = [p["phases_s"]["first_step_s"] for p in record.get("processes") or []
              if "first_step_s" in (p.get("phases_s") or {})]
    per_process = seconds_per_process(record)
    if not firsts:
        return per_process
    return max(0.0, per_process - statistics.fmean(firsts)) + min(CACHED_FIRST_STEP_S, min(firsts))


def guess_s(case: Case, taken: list[dict]) -> float | None:
    """Seconds one process of a case with no stored time should take, from this sweep's processes so
    far (each {"launcher", "outside_s", "micro_step_s"}: its time outside the measured windows and its
    windows' seconds per micro-batch): the median outside time of processes with the same launcher
    (torchrun starts twice: its agent, then the ranks), else of all, plus the case's windows of steps x
    accumulation micro-batches at the median pace, at least `min_window_s` each: its measured ones,
    one unmeasured where a real loader feeds it, and DDP's no-sync window over several ranks (the
    outside time counts neither those nor the windows after); None before any process finished."""
    if not taken:
        return None
    same = [t for t in taken if t["launcher"] == case.launcher] or taken
    outside = statistics.median(t["outside_s"] for t in same)
    window = max(case.steps * case.accumulation_steps * statistics.median(t["micro_step_s"] for t in taken),
                 case.min_window_s)
    extra = (case.loader != "synthetic") + (case.strategy == "ddp" and case.gpus > 1)
    return outside + (case.repeats + extra) * window


BUDGET_GRACE_S = 30.0
"""How far past its budget a search lets a case it already started run before stopping it."""


def budget_capped(case: Case, left_s: float, processes: int = 1) -> Case:
    """The case with each of its `processes` given at most its share of the budget left (plus the grace)
    as its timeout: a candidate whose compilation runs far past the estimate that let it start is stopped
    and stored as a timeout, so the search ends near its budget with its answer and recipes written."""
    share = max(1.0, (left_s + BUDGET_GRACE_S) / max(1, processes))
    return case if case.timeout_s <= share else case.replace(timeout_s=round(share, 1))
