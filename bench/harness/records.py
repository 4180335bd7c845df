"""A case measured in fresh processes and turned into the record the store keeps: its figure, its
interval, each process's summary, the environment and the diagnosis."""
from __future__ import annotations

import os

from ..analysis.diagnose import diagnose
from ..core import phases, stats
from ..core.case import Case
from ..core.labels import profile_text
from ..store.record import DEFINITIONS, SCHEMA
from ..store.tree import Store, commit_folder
from . import env as envmod
from .dist import DistArgs
from . import launch
from .peak import load_or_measure


def machine_peak(store: Store, env: dict, device: str) -> dict:
    """The machine's measured matmul peak (for MFU); BENCH_SKIP_PEAK leaves it out."""
    if os.environ.get("BENCH_SKIP_PEAK"):
        return {}
    return load_or_measure(store.root / envmod.machine_slug(env), device, env)


def assemble(case: Case, result: dict, sweep: str, env: dict, started_at: str, peak: dict, run_id: str) -> dict:
    record = {
        "schema": SCHEMA, "definitions": DEFINITIONS, "run_id": run_id, "processes": result.get("processes", []),
        "sweep": sweep, "case_id": case.case_id, "case": case.to_dict(),
        "status": result["status"], "reason": result.get("reason", ""),
        "machine": envmod.machine_slug(env), "commit_folder": commit_folder(env), "env": env,
        "started_at": started_at, "wall_s": result.get("wall_s"), "metrics": result.get("metrics", {}),
        "ranks": result.get("ranks", []), "stderr_tail": result.get("stderr_tail", []),
        "launch_command": result.get("command", ""),
        "phases_s": phases.total([p["phases_s"] for p in result.get("processes", [])]),
    }
    shared = [{**s, "process": i + 1} for i, p in enumerate(record["processes"]) for s in p.get("gpu_shared") or []]
    if shared:  # someone else's work was on the case's GPUs (harness/gpu_guard.py): every reader marks it
        record["gpu_shared"] = shared
    slowdown = {r.get("injected_slowdown_pct") for r in record["ranks"]} - {None, 0, 0.0}
    if slowdown:  # a deliberately slowed run (a test of the comparison) says so in every record
        record["injected_slowdown_pct"] = max(slowdown)
    record["diagnosis"] = diagnose(record, peak)
    return record


def run_case(case: Case, dist: DistArgs = DistArgs(), guard=None, **launch_args) -> dict:
    """One process set of the case (launch.run_case) between two looks at its GPUs (harness/gpu_guard.py):
    the one before may refuse the run, and whatever either saw, or the case's own samplers saw during its
    windows, is the result's `gpu_shared`."""
    seen = guard.before(case) if guard is not None else []
    result = launch.run_case(case, dist, **launch_args)
    seen += guard.after(case, result, seen) if guard is not None else []
    if seen:
        result["gpu_shared"] = seen
    return result


def process_summary(result: dict) -> dict:
    """What a record keeps of each fresh process: its figure and its windows."""
    m = result.get("metrics") or {}
    return {"status": result["status"], "images_per_s": m.get("images_per_s"),
            "images_per_s_repeats": m.get("images_per_s_repeats"), "input_stall_pct": m.get("input_stall_pct"),
            "data_wait_pct": m.get("data_wait_pct"), "wall_s": result.get("wall_s"),
            "host_cpu_busy_pct": m.get("host_cpu_busy_pct"), "host_cpu_steal_pct": m.get("host_cpu_steal_pct"),
            "windows_s": [r.get("windows_s") for r in result.get("ranks", [])], "phases_s": phases_of(result),
            "host_cpu_outside_pct": m.get("host_cpu_outside_pct"),
            **({"gpu_shared": result["gpu_shared"]} if result.get("gpu_shared") else {})}


def phases_of(result: dict) -> dict:
    """Where this process's time went (core/phases.py), from rank 0's marks and the launcher's."""
    ranks = result.get("ranks") or [{}]
    return phases.process_phases(ranks[0].get("phase_marks") or {}, result.get("launch_marks") or {})


def measure(case: Case, processes: int, floor: dict | None, dist: DistArgs = DistArgs(),
            then: Case | None = None, on_phase=None, guard=None) -> dict:
    """The case in `processes` fresh process sets, one after another. Its figure is the median of
    theirs, with the 95% interval of stats.ci95; the first that fails decides the case's status.
    `then`: the case the caller runs next, started ahead (harness/launch.py)."""
    runs = []
    for i in range(processes):
        tell = None if on_phase is None else (
            lambda text, i=i: on_phase(f"process {i + 1} of {processes}: {text}" if processes > 1 else text))
        result = run_case(case, dist, then=case if i + 1 < processes else then, on_phase=tell, guard=guard)
        runs.append(result)
        if result["status"] != "ok":
            if processes > 1:
                result["reason"] = f"process {i + 1} of {processes}: {result['reason']}"
            break
    return combine(case, runs, floor)


def combine(case: Case, runs: list[dict], floor: dict | None) -> dict:
    """The case's result from its processes' results: the first failure decides, else the median
    process stands for the case with the metrics of stats.combine_processes."""
    last = runs[-1]
    wall = sum(r["wall_s"] for r in runs)
    summaries = [process_summary(r) for r in runs]
    if last["status"] != "ok":
        return {**last, "wall_s": wall, "processes": summaries}
    metrics = stats.combine_processes([r["metrics"] for r in runs], floor_for(case, floor), case.gpus)
    return {**runs[metrics["median_process"]], "metrics": metrics, "wall_s": wall, "processes": summaries}


def floor_for(case: Case, floor: dict | None) -> dict | None:
    """The run's floor is a synthetic case's process-to-process noise; a real loader's is its own (on
    one H200 the torch DataLoader's end-to-end figure moved 10.8% between two single-process runs
    three minutes apart, against intervals of +-4.6% and +-4.1% built on that floor), so a case a
    real loader feeds is judged by its own processes alone: with one process it has no interval."""
    return floor if case.loader == "synthetic" else None


def summary_line(record: dict) -> str:
    m = record["metrics"]
    if record["status"] != "ok":
        return f"  {record['status']}: {record['reason']}"
    d = record.get("diagnosis") or {}
    ci = m.get("images_per_s_ci95")
    unit = "GPU" if record["case"]["device"] == "cuda" else "rank"
    why = ("1 process of a real loader, whose noise the floor does not cover: use --processes 3"
           if record["case"].get("loader", "synthetic") != "synthetic" else "1 process, no noise floor")
    noise = (f"95% interval {ci[0]:,.1f}-{ci[1]:,.1f} ({m.get('processes', 1)} process(es))" if ci
             else f"no interval ({why}); windows' spread {m['spread_pct']:.1f}%")
    stall = m.get("input_stall_pct")
    return (f"  ok: {m['images_per_s']:,.1f} images/s ({m['images_per_s_per_gpu']:,.1f} per {unit}), {noise}, "
            + (f"input stall {stall:.1f}%, " if stall is not None else f"data wait {m['data_wait_pct']:.1f}%, ") +
            f"step {m['step_time_median_s'] * 1000:.1f} ms, case {record['wall_s']:.0f} s{_windows_share(record)}"
            + (f"; {d['verdict']}: {d['evidence']}" if d.get("verdict") else "") + profile_text(record))


def node_line(record: dict, node_rank: int) -> str:
    """What a node that does not store says of a case: no figure, since its records hold only its own ranks'
    share of it; node 0 gathers every rank's, stores the case and prints its figure."""
    if record["status"] != "ok":
        return f"  {record['status']} on node {node_rank}: {record['reason']}"
    return f"  ok on node {node_rank}: its ranks ran; node 0 stores the case and prints its figure"


def _windows_share(record: dict) -> str:
    share = phases.windows_share_pct(record.get("phases_s") or {})
    return "" if share is None else f" ({share:.0f}% in measured windows)"


def reused(record: dict, sweep: str) -> dict:
    """A case this invocation already measured in another sweep, stored under this sweep too."""
    return {**record, "sweep": sweep, "reused_from_sweep": record.get("reused_from_sweep") or record["sweep"]}
