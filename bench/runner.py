"""Run a list of cases one after another, storing each result as soon as it exists."""
from __future__ import annotations

import contextlib
import datetime
import os
import signal
import sys
import threading
import time

from . import env as envmod
from .case import Case
from .diagnose import diagnose
from .launch import DistArgs, run_case
from .peak import load_or_measure
from .results import SCHEMA, Store, commit_folder


class NotEnoughGPUs(SystemExit):
    pass


def check_gpus(cases: list[Case], visible: int, dist: DistArgs = DistArgs()) -> None:
    """Refuse, before anything runs, cases that need more GPUs than this machine shows."""
    need = max((c.gpus // dist.nnodes for c in cases if c.device == "cuda"), default=0)
    if need > visible:
        raise NotEnoughGPUs(f"error: the cases need {need} GPU(s) on this machine but {visible} "
                            f"{'is' if visible == 1 else 'are'} visible; ask for at most {visible}")


def check_data(cases: list[Case]) -> None:
    """Refuse, before anything runs, a missing or too small data folder."""
    from .data import DataError, check_size, scan
    folders = {}
    for c in cases:
        if c.loader in ("torch", "dali"):
            try:
                folder = folders.get(c.data_dir) or folders.setdefault(c.data_dir, scan(c.data_dir))
                check_size(folder, c)
            except DataError as e:
                raise SystemExit(f"error: {e}") from None
    for folder in folders.values():
        if folder.skipped:
            print(f"note: {len(folder.skipped)} non-JPEG or truncated file(s) in {folder.root} are skipped "
                  f"({folder.count} JPEGs used)")


def machine_peak(store: Store, env: dict, device: str) -> dict:
    """The machine's measured matmul peak (for MFU); BENCH_SKIP_PEAK leaves it out."""
    if os.environ.get("BENCH_SKIP_PEAK"):
        return {}
    return load_or_measure(store.root / envmod.machine_slug(env), device, env)


def assemble(case: Case, result: dict, sweep: str, env: dict, started_at: str, peak: dict) -> dict:
    record = {
        "schema": SCHEMA, "sweep": sweep, "case_id": case.case_id, "case": case.to_dict(),
        "status": result["status"], "reason": result.get("reason", ""),
        "machine": envmod.machine_slug(env), "commit_folder": commit_folder(env), "env": env,
        "started_at": started_at, "wall_s": result.get("wall_s"), "metrics": result.get("metrics", {}),
        "ranks": result.get("ranks", []), "stderr_tail": result.get("stderr_tail", []),
        "launch_command": result.get("command", ""),
    }
    record["diagnosis"] = diagnose(record, peak)
    return record


def _fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def summary_line(record: dict) -> str:
    m = record["metrics"]
    if record["status"] != "ok":
        return f"  {record['status']}: {record['reason']}"
    d = record.get("diagnosis") or {}
    return (f"  ok: {m['images_per_s']:,.1f} images/s ({m['images_per_s_per_gpu']:,.1f} per GPU), "
            f"spread {m['spread_pct']:.1f}%, data wait {m['data_wait_pct']:.1f}%, "
            f"step {m['step_time_median_s'] * 1000:.1f} ms, case {record['wall_s']:.0f} s"
            + (f"; {d['verdict']}: {d['evidence']}" if d.get("verdict") else ""))


def reused(record: dict, sweep: str) -> dict:
    """A case this invocation already measured in another sweep, stored under this sweep too."""
    return {**record, "sweep": sweep, "reused_from_sweep": record.get("reused_from_sweep") or record["sweep"]}


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM (a batch scheduler's cancel, `timeout`) takes Ctrl-C's path: the running case's
    processes are killed and every finished result is kept. Signal handlers belong to the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_cases(cases: list[Case], sweep: str, store: Store, dist: DistArgs = DistArgs(),
              resume: bool = False, out=sys.stdout, measured: dict | None = None) -> list[dict]:
    """Run each case in fresh processes and store it. `measured` (case id -> record) carries the
    cases an earlier sweep of the same invocation ran, so an identical case is not run twice."""
    env = envmod.collect()
    check_gpus(cases, envmod.visible_gpu_count(), dist)
    check_data(cases)
    stores = dist.nnodes == 1 or dist.node_rank == 0
    machine, commit = envmod.machine_slug(env), commit_folder(env)
    device = "cuda" if any(c.device == "cuda" for c in cases) else "cpu"
    peak = machine_peak(store, env, device)
    print(f"sweep {sweep!r}: {len(cases)} case(s) on {machine}, commit {commit}, "
          f"results in {store.sweep_dir(machine, commit, sweep)}", file=out, flush=True)
    records, t0, done = [], time.monotonic(), 0

    def keep(record: dict) -> None:
        if stores:
            store.save(record)
        records.append(record)

    with terminate_as_interrupt():
        for i, case in enumerate(cases, 1):
            before = store.stored_status(machine, commit, sweep, case.case_id) if resume else None
            if before == "ok":
                print(f"[{i}/{len(cases)}] {case.case_id}: already stored, skipped (--resume)", file=out, flush=True)
                continue
            if before:  # a failure or a skip may have had a passing cause (DALI missing, a timeout)
                print(f"[{i}/{len(cases)}] {case.case_id}: stored as {before}, running it again (--resume)",
                      file=out, flush=True)
            if measured is not None and case.case_id in measured:
                keep(reused(measured[case.case_id], sweep))
                print(f"[{i}/{len(cases)}] {case.case_id}: measured in sweep {records[-1]['reused_from_sweep']!r} "
                      "of this run, stored here too", file=out, flush=True)
                continue
            elapsed = time.monotonic() - t0
            eta = f", about {_fmt_s(elapsed / done * (len(cases) - i + 1))} left" if done else ""
            print(f"[{i}/{len(cases)}] {case.case_id} (elapsed {_fmt_s(elapsed)}{eta})", file=out, flush=True)
            started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            result = run_case(case, dist)
            done += 1
            keep(assemble(case, result, sweep, env, started, peak))
            if measured is not None:
                measured[case.case_id] = records[-1]
            print(summary_line(records[-1]), file=out, flush=True)
    print(f"sweep {sweep!r} finished in {_fmt_s(time.monotonic() - t0)}", file=out, flush=True)
    return records
