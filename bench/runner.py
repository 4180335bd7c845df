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
from . import stats
from .case import Case
from .diagnose import diagnose
from .launch import DistArgs, run_case
from .peak import load_or_measure
from .results import DEFINITIONS, SCHEMA, Store, commit_folder, new_run_id, save_fallback


class NotEnoughGPUs(SystemExit):
    pass


def check_gpus(cases: list[Case], visible: int, dist: DistArgs = DistArgs()) -> None:
    """Refuse, before anything runs, cases that need more GPUs than this machine shows."""
    need = max((c.gpus // dist.nnodes for c in cases if c.device == "cuda"), default=0)
    if need > visible:
        raise NotEnoughGPUs(f"error: the cases need {need} GPU(s) on this machine but {visible} "
                            f"{'is' if visible == 1 else 'are'} visible; ask for at most {visible}")


def check_nodes(cases: list[Case], dist: DistArgs) -> None:
    """Refuse, before anything runs, a case whose GPUs do not divide over the nodes."""
    for c in cases:
        if c.launcher == "torchrun" and c.gpus % dist.nnodes:
            raise NotEnoughGPUs(f"error: {c.case_id} needs gpus={c.gpus}, which does not divide over "
                                f"--nnodes={dist.nnodes}; use a multiple of {dist.nnodes}")


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


def assemble(case: Case, result: dict, sweep: str, env: dict, started_at: str, peak: dict, run_id: str) -> dict:
    record = {
        "schema": SCHEMA, "definitions": DEFINITIONS, "run_id": run_id, "processes": result.get("processes", []),
        "sweep": sweep, "case_id": case.case_id, "case": case.to_dict(),
        "status": result["status"], "reason": result.get("reason", ""),
        "machine": envmod.machine_slug(env), "commit_folder": commit_folder(env), "env": env,
        "started_at": started_at, "wall_s": result.get("wall_s"), "metrics": result.get("metrics", {}),
        "ranks": result.get("ranks", []), "stderr_tail": result.get("stderr_tail", []),
        "launch_command": result.get("command", ""),
    }
    slowdown = {r.get("injected_slowdown_pct") for r in record["ranks"]} - {None, 0, 0.0}
    if slowdown:  # a deliberately slowed run (a test of the comparison) says so in every record
        record["injected_slowdown_pct"] = max(slowdown)
    record["diagnosis"] = diagnose(record, peak)
    return record


def process_summary(result: dict) -> dict:
    """What a record keeps of each fresh process: its figure and its windows."""
    m = result.get("metrics") or {}
    return {"status": result["status"], "images_per_s": m.get("images_per_s"),
            "images_per_s_repeats": m.get("images_per_s_repeats"), "input_stall_pct": m.get("input_stall_pct"),
            "data_wait_pct": m.get("data_wait_pct"), "wall_s": result.get("wall_s"),
            "host_cpu_busy_pct": m.get("host_cpu_busy_pct"), "host_cpu_steal_pct": m.get("host_cpu_steal_pct"),
            "windows_s": [r.get("windows_s") for r in result.get("ranks", [])]}


def measure(case: Case, processes: int, floor: dict | None, dist: DistArgs = DistArgs()) -> dict:
    """The case in `processes` fresh process sets, one after another. Its figure is the median of
    theirs, with the 95% interval of stats.ci95; the first that fails decides the case's status."""
    runs = []
    for i in range(processes):
        result = run_case(case, dist)
        runs.append(result)
        if result["status"] != "ok":
            if processes > 1:
                result["reason"] = f"process {i + 1} of {processes}: {result['reason']}"
            break
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


class Run:
    """One invocation of the suite: its id, environment, processes per case and the machine's
    process-to-process noise floor, measured in the same run and kept in its manifest."""

    def __init__(self, store: Store, dist: DistArgs = DistArgs(), processes: int = 1, out=sys.stdout):
        if processes < 1:
            raise ValueError(f"processes={processes} must be >= 1")
        self.store, self.dist, self.processes, self.out = store, dist, processes, out
        self.env = envmod.collect()
        self.run_id = new_run_id()
        self.machine, self.commit = envmod.machine_slug(self.env), commit_folder(self.env)
        self.floor = None
        self.stores = dist.nnodes == 1 or dist.node_rank == 0
        self.begun = False
        self.manifest = {"run_id": self.run_id, "machine": self.machine, "commit_folder": self.commit,
                         "started_at": _now(), "processes": processes, "sweeps": [], "noise_floor": None,
                         "noise_floor_end": None, "env": self.env}

    def begin(self, cases: list[Case]) -> None:
        """Everything that can refuse the run, in one line each, before anything is measured: GPUs,
        nodes, data folders, then the results folder (writable, with room) and its lock."""
        check_gpus(cases, envmod.visible_gpu_count(), self.dist)
        check_nodes(cases, self.dist)
        check_data(cases)
        self.claim()

    def claim(self) -> None:
        """The results folder (writable, with room) and this machine's lock, so that no other run of the
        suite measures beside this one; StoreError says why not."""
        if self.stores and not self.begun:
            self.store.check_writable(self.machine, self.commit)
            self.store.lock(self.machine, f"pid {os.getpid()}, run {self.run_id}, started {_now()}")
        self.begun = True

    def save(self) -> None:
        if self.stores:
            self.store.save_run(self.manifest)

    def measure_floor(self, reference: Case, n: int, at: str = "start") -> dict | None:
        """The reference case in n fresh processes; their spread is this run's noise floor."""
        if n < 2:
            return None
        print(f"noise floor ({at} of run {self.run_id}): {reference.case_id} in {n} fresh processes",
              file=self.out, flush=True)
        figures, walls, reason = [], [], ""
        for _ in range(n):
            r = run_case(reference, self.dist)
            if r.get("wall_s"):
                walls.append(r["wall_s"])
            if r["status"] != "ok":
                reason = f"{r['status']}: {r['reason']}"
                break
            figures.append(r["metrics"]["images_per_s"])
        return self.adopt_floor(reference, figures if len(figures) == n else [], reason, at, walls)

    def adopt_floor(self, reference: Case, figures: list[float], reason: str = "", at: str = "start",
                    walls: list[float] | None = None) -> dict:
        """Keep these fresh-process figures of the reference case as the run's noise floor (and print it);
        `walls`, each process's seconds, let a later --dry-run say what a floor costs here."""
        n = len(figures)
        floor = {**(stats.noise_floor(figures) if n >= 2 else {"error": reason or "not measured"}),
                 "case_id": reference.case_id, "case": reference.to_dict()}
        if walls:
            floor["process_wall_s"] = walls
        key = "noise_floor" if at == "start" else "noise_floor_end"
        self.manifest[key] = floor
        if at == "start" and "rel_sd" in floor:
            self.floor = floor
        print("  " + (f"{n} processes: {', '.join(f'{x:,.1f}' for x in figures)} images/s, "
                      f"process-to-process sd {100 * floor['rel_sd']:.2f}%" if "rel_sd" in floor
                      else f"not measured ({floor['error']}); intervals then come from each case's own processes"),
              file=self.out, flush=True)
        self.save()
        return floor

    def finish(self, interrupted: bool = False) -> None:
        self.manifest.update(finished_at=_now(), interrupted=interrupted)
        try:
            self.save()
        finally:
            self.store.unlock()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


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
            f"step {m['step_time_median_s'] * 1000:.1f} ms, case {record['wall_s']:.0f} s"
            + (f"; {d['verdict']}: {d['evidence']}" if d.get("verdict") else ""))


def reused(record: dict, sweep: str) -> dict:
    """A case this invocation already measured in another sweep, stored under this sweep too."""
    return {**record, "sweep": sweep, "reused_from_sweep": record.get("reused_from_sweep") or record["sweep"]}


class Stopped(KeyboardInterrupt):
    """A stop asked by a signal; `exit_code` is 128 + its number, as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM (a batch scheduler's cancel, `timeout`) and SIGHUP (a closed terminal) take Ctrl-C's
    path: the running case's processes are killed and every finished result is kept. Signal
    handlers belong to the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Stopped(signum)
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_cases(cases: list[Case], sweep: str, store: Store, dist: DistArgs = DistArgs(),
              resume: bool = False, out=sys.stdout, measured: dict | None = None, run: Run | None = None,
              processes: int | None = None, header: bool = True) -> list[dict]:
    """Run each case in fresh processes and store it. `measured` (case id -> record) carries the
    cases an earlier sweep of the same invocation ran, so an identical case is not run twice.
    `run` is the invocation this sweep belongs to (one is made, with no noise floor, if none is given);
    `processes` overrides its processes per case; `header` False leaves out the sweep's opening and
    closing lines (a search that runs its cases one at a time)."""
    if run is None:  # a run of its own, finished when this sweep is
        run = Run(store, dist, out=out)
        try:
            records = run_cases(cases, sweep, store, dist, resume, out, measured, run, processes, header)
        except BaseException:
            run.finish(interrupted=True)
            raise
        run.finish()
        return records
    env = run.env
    run.begin(cases)
    stores = run.stores
    machine, commit = run.machine, run.commit
    device = "cuda" if any(c.device == "cuda" for c in cases) else "cpu"
    peak = machine_peak(store, env, device)
    processes = processes or run.processes
    if sweep not in run.manifest["sweeps"]:
        run.manifest["sweeps"].append(sweep)
    run.save()
    if header:
        print(f"sweep {sweep!r}: {len(cases)} case(s) on {machine}, commit {commit}, run {run.run_id}, "
              f"{processes} process(es) per case, results in {store.sweep_dir(machine, commit, sweep)}",
              file=out, flush=True)
    records, t0 = [], time.monotonic()
    from . import plan, query
    stored_times = plan.per_process_times(query.load([store.root / machine])[0]) if (store.root / machine).is_dir() else {}
    taken: list[float] = []  # seconds per process of the cases measured so far in this sweep

    def time_left(remaining: list[Case]) -> str:
        """Per recipe: this machine's stored time for it, else the mean of this sweep's cases so far."""
        guess = sum(taken) / len(taken) if taken else None
        per = [plan.expected_s(c, stored_times) or guess for c in remaining]
        if any(p is None for p in per):
            return ""
        return f", about {_fmt_s(sum(per) * processes)} left"

    def keep(record: dict) -> None:
        if stores:
            try:
                store.save(record)
            except OSError as e:  # the folder failed after the measurement: keep the figure, go on
                print(f"  could not store the result ({e.__class__.__name__}: {e}); saved it to "
                      f"{save_fallback(record, e)}", file=out, flush=True)
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
            print(f"[{i}/{len(cases)}] {case.case_id} (elapsed {_fmt_s(elapsed)}{time_left(cases[i - 1:])})"
                  if header else case.case_id + (f" ({processes} processes)" if processes > 1 else ""),
                  file=out, flush=True)
            started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            result = measure(case, processes, run.floor, dist)
            taken.append(plan.seconds_per_process(result))
            keep(assemble(case, result, sweep, env, started, peak, run.run_id))
            if measured is not None:
                measured[case.case_id] = records[-1]
            print(summary_line(records[-1]), file=out, flush=True)
    if header:
        print(f"sweep {sweep!r} finished in {_fmt_s(time.monotonic() - t0)}", file=out, flush=True)
    return records
